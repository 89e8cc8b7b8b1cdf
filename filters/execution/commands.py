"""The command policy of agent episodes: which shell commands a step may run at all.

Defence in depth only: the sandbox's isolation is what contains a step (no network, read-only
root, capped resources), the policy keeps trajectories free of steps that would be unsafe or
meaningless elsewhere (``pip install``, ``curl``). A shell script is split into pipeline and list
segments (``|``, ``&&``, ``;``, newlines, subshells); every segment's argv is normalised before it
is checked: quotes are removed the way the shell removes them (``'p'ip`` is ``pip``), assignment
and wrapper prefixes are dropped (``FOO=1 env -i command exec nohup timeout 5 …``), a binary's
absolute path becomes its name, ``python -m pip`` becomes ``pip``, and ``sh -c '…'`` / ``eval``
/ ``$(…)`` / backquotes are checked recursively. A command whose name is computed at run time
(``$CMD``, ``${x}``, ``$(…)``) cannot be checked and is refused.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass, field
from typing import Literal

__all__ = ["DEFAULT_DENY", "CommandPolicy"]

# Each rule is a command name (a glob) and the words that must follow it, in order, among its
# arguments: "pip* install" refuses `pip install x`, `pip3 -q install x`, `python3 -m pip install x`.
DEFAULT_DENY = (
    "pip* install",
    "pip* download",
    "uv",
    "conda",
    "easy_install",
    "curl",
    "wget",
    "nc",
    "ncat",
    "netcat",
    "socat",
    "telnet",
    "ssh",
    "scp",
    "sftp",
    "rsync",
    "ftp",
    "git clone",
    "git fetch",
    "git pull",
    "git push",
    "apt",
    "apt-get",
    "dpkg",
    "sudo",
    "su",
    "mount",
    "nsenter",
    "unshare",
    "chroot",
    "docker",
)
_SHELLS = {"sh", "bash", "dash", "zsh", "ksh", "busybox"}
_PYTHONS = re.compile(r"python[0-9.]*$")
# prefixes that run the rest of the line as a command: name -> options that take a value
_WRAPPERS: dict[str, set[str]] = {
    "env": {"-u", "--unset", "-C", "--chdir", "-S", "--split-string"},
    "command": set(),
    "exec": {"-a"},
    "builtin": set(),
    "nohup": set(),
    "nice": {"-n", "--adjustment"},
    "ionice": {"-c", "-n"},
    "time": set(),
    "stdbuf": {"-i", "-o", "-e"},
    "setsid": set(),
    "timeout": {"-s", "--signal", "-k", "--kill-after"},
    "xargs": {"-I", "-n", "-d", "-P", "-L", "-s", "-E"},
    "chrt": set(),
    "taskset": set(),
}
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_OPERATORS = {"|", "||", "&&", ";", "&", ";;", "(", ")", "|&", "\n", "!", "{", "}"}
_MAX_DEPTH = 8


@dataclass(frozen=True)
class CommandPolicy:
    """``mode: deny`` refuses what ``rules`` match; ``mode: allow`` runs only commands whose name
    matches a rule (and still refuses a computed command name)."""

    mode: Literal["deny", "allow"] = "deny"
    rules: tuple[str, ...] = field(default=DEFAULT_DENY)

    def __post_init__(self) -> None:
        if self.mode not in ("deny", "allow"):
            raise ValueError(f"command policy mode {self.mode!r}: use 'deny' or 'allow'")
        for rule in self.rules:
            if not rule.split():
                raise ValueError("command policy: an empty rule; give a command name like 'curl'")

    def check_script(self, script: str) -> str | None:
        """None if every command in the shell ``script`` may run, else why not."""
        return self._script(script, 0)

    def check_argv(self, argv: list[str]) -> str | None:
        """The same check for one command given as argv (no shell involved)."""
        return self._segment(list(argv), 0)

    # -- parsing ------------------------------------------------------------------------------

    def _script(self, script: str, depth: int) -> str | None:
        if depth > _MAX_DEPTH:
            return "commands nested too deeply to check"
        for inner in _substitutions(script):
            if reason := self._script(inner, depth + 1):
                return reason
        try:
            lexer = shlex.shlex(script.replace("\n", " ; "), posix=True, punctuation_chars=";&|()<>")
            lexer.whitespace_split = True
            lexer.commenters = "#"
            tokens = list(lexer)
        except ValueError as exc:  # an unclosed quote: the shell would not run it either
            return f"cannot parse the command ({exc})"
        segment: list[str] = []
        redirect = False
        for token in [*tokens, ";"]:
            if redirect:  # the target of > < >> is a file name, not a command word
                redirect = False
                continue
            if token and set(token) <= set("<>&") and token not in ("&", "&&"):
                redirect = True
                continue
            if token in _OPERATORS or (token and set(token) <= set(";&|()")):
                if segment and (reason := self._segment(segment, depth)):
                    return reason
                segment = []
                continue
            segment.append(token)
        return None

    def _segment(self, argv: list[str], depth: int) -> str | None:
        argv = _strip_prefixes(argv)
        if not argv:
            return None
        name = argv[0]
        if "$" in name or "`" in name:
            return f"the command name {name!r} is computed at run time and cannot be checked"
        name = name.rsplit("/", 1)[-1]
        args = argv[1:]
        if name in _SHELLS or name == "eval":
            script = _shell_script(args) if name != "eval" else " ".join(args)
            # `bash script.sh` runs a file whose commands are not visible here: the sandbox contains it
            if script is not None:
                return self._script(script, depth + 1)
        if _PYTHONS.match(name) and "-m" in args[:-1]:
            module = args[args.index("-m") + 1]
            return self._segment([module, *args[args.index("-m") + 2 :]], depth)
        return self._judge(name, args)

    def _judge(self, name: str, args: list[str]) -> str | None:
        words = [a for a in args if not a.startswith("-")]
        for rule in self.rules:
            head, *rest = rule.split()
            if fnmatch.fnmatchcase(name, head) and _subsequence(rest, words):
                if self.mode == "deny":
                    return (
                        f"`{' '.join([name, *args])[:120]}` is refused by the command policy (rule {rule!r})"
                    )
                return None
        if self.mode == "allow":
            return f"`{name}` is not on the command policy's allow-list"
        return None


def _substitutions(script: str) -> list[str]:
    """The bodies of ``$(…)`` and backquote substitutions (outside single quotes), outermost first."""
    found, depth, start, quote = [], 0, 0, False
    i = 0
    while i < len(script):
        ch = script[i]
        if ch == "'" and depth == 0:
            quote = not quote
        elif not quote and script.startswith("$(", i):
            if depth == 0:
                start = i + 2
            depth += 1
            i += 1
        elif not quote and ch == ")" and depth:
            depth -= 1
            if depth == 0:
                found.append(script[start:i])
        i += 1
    found += re.findall(r"`([^`]*)`", script)
    return found


def _strip_prefixes(argv: list[str]) -> list[str]:
    """Drop ``VAR=value`` assignments and wrapper commands with their options."""
    while argv:
        if _ASSIGNMENT.match(argv[0]):
            argv = argv[1:]
            continue
        name = argv[0].rsplit("/", 1)[-1]
        if name not in _WRAPPERS:
            return argv
        takes_value = _WRAPPERS[name]
        rest = argv[1:]
        while rest and (rest[0].startswith("-") or _ASSIGNMENT.match(rest[0])):
            option = rest.pop(0)
            if option == "--":
                break
            if option in takes_value and rest:
                rest.pop(0)
        if name == "timeout" and rest:
            rest = rest[1:]  # the duration
        if name in ("chrt", "taskset") and rest:
            rest = rest[1:]  # the priority or CPU mask
        argv = rest
    return argv


def _shell_script(args: list[str]) -> str | None:
    """The script a shell runs with ``-c`` (``-c`` may be bundled: ``-ec``, ``-xc``)."""
    for index, arg in enumerate(args):
        if arg.startswith("-") and not arg.startswith("--") and "c" in arg[1:] and index + 1 < len(args):
            return args[index + 1]
    return None


def _subsequence(wanted: list[str], words: list[str]) -> bool:
    position = 0
    for word in words:
        if position < len(wanted) and fnmatch.fnmatchcase(word, wanted[position]):
            position += 1
    return position == len(wanted)
