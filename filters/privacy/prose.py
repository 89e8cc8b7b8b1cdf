"""Passwords written in prose or spread over lines, which the one-line rules of credentials.py do
not see (each because a planted value went through to a stored row):

- a password after a phrase that names one (English, German, French, Spanish, Portuguese, Dutch,
  Italian, Swedish, Danish, Polish, Russian, Turkish ..., Japanese, Chinese, Korean): "changed the
  admin password to X", "pw: X", "username admin password X for", "the passcode X", "passphrase
  for the above: X", German "Passwort ... lautet X", Spanish "contraseña ... es X", "credentials
  are root/X", "Credentials: admin / X", "my pass is X", a Wi-Fi network's "key: X", "log in as
  deploy with X";
- a chat line ``name: X`` right after another's chat line that mentions a password; a reply
  ``user / X`` (``> sure: deploy / X``) right after a line that asks for a password or "creds";
- "tried `sudo` with X", "root / pass X" ("pass" alone is English: only before a password's shape);
- a ``.netrc`` entry over lines (``machine`` / ``login`` / ``password``);
- a Kubernetes env list's ``- name: DB_PASSWORD`` then ``value: "X"`` (also ``{"name": ..., "value": ...}``).

A prose value must look like a password (:func:`looks_like_password`): 8-64 characters, no space,
a letter and a digit, and a symbol or both cases, and no placeholder; words, versions and names
are left alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from ptfactory.filters.privacy.credentials import _NAME, credible, holds_secret, placeholder

__all__ = ["looks_like_password", "prose_secrets"]

_WORD = (
    r"(?:passw(?:or)?d|passwort|passcode|passphrase|pw|pwd|contraseña|senha|wachtwoord|mot de passe|kennwort|"
    r"пароль|hasło|haslo|lösenord(?:et)?|şifre(?:si|niz)?|adgangskode(?:n)?|passord(?:et)?|salasana|jelszó|heslo)"
)
_VALUE = r"[\"'`]?(?P<value>[^\s\"'`]{8,80})"
_PROSE = tuple(
    re.compile(rule, re.IGNORECASE)
    for rule in (
        # "password ... to|is|lautet|es X", "passphrase for the above: X"
        r"(?<![\w-])"
        + _WORD
        + r"\b(?:,?\s+[\w'’-]+){0,8}?(?:,?\s+(?:to|is|was|are|lautet|ist|es|est|é|è|será|är|er|jest|je)\s+|\s*:\s*)"
        + _VALUE,
        # "password X", "the passcode X"
        r"(?<![\w-])" + _WORD + r"\s+" + _VALUE,
        # "credentials are root/X", "login is admin:X", "Credentials: admin / X"
        r"\b(?:credentials?|login|creds)\b[^\n.]{0,30}?(?:\s(?:are|is)|\s?:)\s*[\w.@-]{1,40}(?: ?/ ?|:)"
        + _VALUE,
        # "my pass is X" ("pass" alone is an English word: only "pass is|was", and a password's shape)
        r"(?<![\w-])pass\s+(?:is|was)\s+" + _VALUE,
        # "log in as deploy with X", "sign in as `admin` using password X"; "tried `sudo` with X"
        r"\b(?:log\s?in|sign\s?in|logon)\s+as\s+[`'\"]?[\w.@\\-]{1,40}[`'\"]?\s+(?:with|using)\s+"
        r"(?:(?:the\s+)?(?:password|pw|pass)\s+)?" + _VALUE,
        r"\b(?:sudo|su)\b[`'\"]?\s+(?:as\s+\S{1,40}\s+)?(?:with|using)\s+(?:(?:the\s+)?(?:password|pw|pass)\s+)?"
        + _VALUE,
        # "user admin pass: X", "root / pass X" ("pass" alone is English: after ":" or a login)
        r"(?<![\w&?.-])pass\s*:\s*" + _VALUE,  # (pass=X is an assignment: credentials.py's)
        r"(?:\b(?:user(?:name)?|login|root|admin)\b|/)[^\n]{0,40}?(?<![\w-])pass\s+" + _VALUE,
        # Japanese, Chinese, Korean: パスワードは X, 密码是 X, 비밀번호는 X (no word boundary; an ASCII value)
        r"(?:パスワード|暗証番号|密码|密碼|口令|비밀번호|암호)\s*(?:は|是|为|為|는|은)?\s*[:：]?\s*[\"'`「]?"
        r"(?P<value>[!#-&(-_a-~]{8,80})",
        # "Guest Wi-Fi: ACME-Guest, key: X"
        r"\b(?:wi-?fi|wlan|wpa2?|wireless)\b[^\n]{0,60}?\b(?:key|psk)\b\s*[:=]?\s*" + _VALUE,
    )
)
_MENTION = re.compile(r"(?i)(?<![\w-])" + _WORD + r"\b")
_ASKED = re.compile(r"(?i)(?<![\w-])(?:" + _WORD[3:-1] + r"|creds|credentials|login details)\b")
# a reply that is a login and its password: "> sure: deploy / X" (after a line asking; spaced, so a
# vault path "team/prod-db1" is none)
_PAIR = re.compile(
    r"^[>\s-]*(?:\[[^\]\n]{1,20}\]\s*)?(?:[\w ]{1,20}:\s*)?[\w.@\\-]{1,40} / (?P<value>[^\s/]{8,64})\s*$"
)
_CHAT = re.compile(r"^(?:\[[^\]\n]{1,20}\]\s*)?[\w .-]{1,30}:\s*(?P<value>\S{8,64})\s*$")
_SPEAKER = re.compile(r"^(?:\[[^\]\n]{1,20}\]\s*)?[\w .-]{1,30}:\s")  # a chat line: [10:42] anna: ...
_NETRC = re.compile(
    r"^\s*machine\s+\S+\s*\n(?:\s*(?:login|account|port)\s+\S+\s*\n){0,3}\s*password\s+(?P<value>\S+)",
    re.MULTILINE,
)
_ENV = re.compile(
    r"[\"']?name[\"']?\s*:\s*[\"']?" + _NAME + r"[\"']?\s*,?\s*\n?\s*[\"']?value[\"']?\s*:\s*[\"']?"
    r"(?P<value>[^\s\"']+)",
    re.IGNORECASE,
)


def looks_like_password(value: str) -> bool:
    """8-64 characters, no space, a letter and a digit, and a symbol or both cases; not a
    placeholder or a variable (``${DB_PASSWORD_V2}``, ``<NEW_PASSWORD_1>``: credentials.py's check)."""
    if not 8 <= len(value) <= 64 or " " in value or placeholder(value) or "://" in value:
        return False
    letter, digit = re.search(r"[A-Za-z]", value), re.search(r"\d", value)
    mixed = re.search(r"[a-z]", value) and re.search(r"[A-Z]", value)
    symbol = re.search(r"[^\w]", value.rstrip(".,;:!?)"))
    return bool(letter and digit and (mixed or symbol)) and not re.fullmatch(r"v?\d+(?:\.\w+)+", value)


def _trim(value: str) -> str:
    return value.rstrip(".,;:!?)")


def prose_secrets(text: str) -> Iterator[tuple[int, int]]:
    """Where the values of the forms above stand in ``text``."""
    for rule in _PROSE:
        for m in rule.finditer(text):
            value = _trim(m.group("value"))
            if looks_like_password(value):
                yield m.start("value"), m.start("value") + len(value)
    lines = text.splitlines(keepends=True)
    offset = 0
    for i, line in enumerate(lines):
        chat = _CHAT.match(line.rstrip("\r\n"))
        asked = i and _SPEAKER.match(lines[i - 1]) and _MENTION.search(lines[i - 1])
        if chat and asked and looks_like_password(_trim(chat.group("value"))):
            yield offset + chat.start("value"), offset + chat.start("value") + len(_trim(chat.group("value")))
        pair = _PAIR.match(line.rstrip("\r\n"))
        if pair and i and _ASKED.search(lines[i - 1]) and looks_like_password(_trim(pair.group("value"))):
            yield offset + pair.start("value"), offset + pair.start("value") + len(_trim(pair.group("value")))
        offset += len(line)
    for m in _NETRC.finditer(text):
        if credible(m.group("value"), "password"):
            yield m.span("value")
    for m in _ENV.finditer(text):
        if holds_secret(m.group("name")) and credible(m.group("value"), m.group("name")):
            yield m.span("value")
