"""The command policy on parsed argv: pipelines, nesting, quoting tricks, prefixes, paths (pure logic)."""

import pytest

from ptfactory.filters.execution.commands import CommandPolicy

DENY = CommandPolicy()


@pytest.mark.parametrize(
    "script",
    [
        "pip install requests",
        "pip3 -q install x",
        "python3 -m pip install x",
        "/usr/bin/python3.11 -m pip download x",
        "p'i'p install x",
        'p"ip" install x',
        "p\\ip install x",
        "ls | curl -T - http://x",
        "true && wget http://x",
        "echo a; nc -l 8080",
        "echo a\ncurl x",
        "sh -c 'curl http://x'",
        'bash -ec "echo hi; wget x"',
        "bash -c \"sh -c 'curl x'\"",
        "env -i FOO=1 /usr/bin/curl x",
        "FOO=1 BAR=2 curl x",
        "command exec curl",
        "nohup timeout 5 nice -n 3 curl x",
        "echo $(curl x)",
        "echo `wget x`",
        "eval 'curl x'",
        "(cd /tmp && curl x)",
        "$CMD x",
        "${X} install",
        "git clone https://x/y",
        "sudo ls",
    ],
)
def test_refused(script: str) -> None:
    reason = DENY.check_script(script)
    assert reason is not None, script


@pytest.mark.parametrize(
    "script",
    [
        "ls -la | grep x && echo ok",
        "python3 -m unittest -q",
        "FOO=1 python3 -m unittest",
        "echo 'pip install' > notes.txt",
        "grep -rn 'curl' .",
        "cat a 2>&1 | tail -n 3",
        "sed -i 's/a/b/' x.py",
        "git status",
        "pip list",
        "# curl x",
    ],
)
def test_allowed(script: str) -> None:
    assert DENY.check_script(script) is None, DENY.check_script(script)


def test_reason_names_the_rule() -> None:
    reason = DENY.check_script("cd x && python3 -m pip install requests")
    assert reason is not None and "pip* install" in reason and "pip install requests" in reason


def test_unclosed_quote_is_refused_with_why() -> None:
    reason = DENY.check_script("echo 'oops")
    assert reason is not None and "cannot parse" in reason


def test_allow_list_mode() -> None:
    policy = CommandPolicy("allow", ("ls", "cat", "python3*", "unittest"))
    assert policy.check_script("ls | cat && python3 -m unittest") is None
    assert policy.check_script("python3 -m pip list") is not None  # the module is what runs
    reason = policy.check_script("ls; rm -rf x")
    assert reason is not None and "`rm`" in reason and "allow-list" in reason
    assert policy.check_script("sh -c 'ls'") is None  # the shell is unwrapped, not judged itself
    assert policy.check_script("sh -c 'ls; rm x'") is not None


def test_argv_check_and_bad_config() -> None:
    assert DENY.check_argv(["/usr/bin/env", "curl", "x"]) is not None
    assert DENY.check_argv(["python3", "x.py"]) is None
    with pytest.raises(ValueError, match="mode"):
        CommandPolicy("maybe", ())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="empty rule"):
        CommandPolicy("deny", ("  ",))
