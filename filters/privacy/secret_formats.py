"""Secret formats detect-secrets 1.5 lacks, as detect-secrets plugins (its documented extension
point: a ``RegexBasedDetector`` with a ``secret_type`` and a ``denylist``).

Each because a planted value went through to a stored row:

- ``TokenFormatDetector`` (API_KEY): today's token prefixes. detect-secrets' OpenAI plugin knows only
  the old ``sk-...T3BlbkFJ...`` key, and it has no rule for ``sk-proj-`` / ``sk-ant-`` keys, Google's
  ``AIza`` keys, Hugging Face's ``hf_``, GitHub's fine-grained ``github_pat_`` or bare ``npm_``
  tokens. Its GitHub rule takes exactly 36 characters after ``ghp_`` and left the tail of a longer
  token behind; its JWT rule stops after the payload and left the signature. The prefixes are
  the vendors' (as gitleaks' rules list them); lengths are lower bounds, so a made-up key of the
  right shape is taken whole too.
- ``AssignedSecretDetector`` (CREDENTIAL): a value assigned to a secret's name without quotes
  (``API_KEY=...`` in a .env, ``db_password: ...`` in YAML, ``"token": "..."`` in JSON), a
  ``Bearer`` header, "the password is ...", "the secret (key) is ...", a URL's password
  (``postgres://user:PASSWORD@host``: detect-secrets' rule wants no reserved character in it),
  curl's ``-u user:PASSWORD`` and .netrc's ``login NAME password PASSWORD``.
  detect-secrets' keyword plugin reads a line as the
  file type its name says and, for the Python we tell it, wants quotes. Only the value is taken.
  What keeps code intact: the name must end at the keyword or continue with ``_``/``-`` and more
  of a name (``tokenizer``, ``tokens`` and ``secrets`` are not secrets), and the value must be 8+
  characters with a letter and a digit, end at a space, quote, comma or semicolon and not start
  with ``$``, ``/`` or ``.`` (``tokenizer.encode(text)``, ``os.environ["KEY"]``, ``$DB_PASSWORD``
  and paths are left alone).
"""

from __future__ import annotations

import re

from detect_secrets.plugins.base import RegexBasedDetector

__all__ = ["AssignedSecretDetector", "TokenFormatDetector"]

_END = r"(?![A-Za-z0-9_-])"


class TokenFormatDetector(RegexBasedDetector):
    secret_type = "API token (vendor prefix)"
    denylist = (
        re.compile(r"\bsk-(?:proj|svcacct|admin|ant-(?:api|admin)\d{2})-[A-Za-z0-9_-]{20,}" + _END),
        re.compile(r"\bsk-[A-Za-z0-9]{32,}" + _END),  # OpenAI's older keys; DeepSeek and others
        re.compile(r"\bAIza[0-9A-Za-z_-]{30,}" + _END),  # Google API keys
        re.compile(r"\bhf_[A-Za-z0-9]{30,}" + _END),  # Hugging Face
        re.compile(r"\bgithub_pat_[A-Za-z0-9_]{22,}" + _END),
        re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}" + _END),
        re.compile(r"\bnpm_[A-Za-z0-9]{36,}" + _END),
        re.compile(r"\bglpat-[A-Za-z0-9_-]{20,}" + _END),
        re.compile(r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}" + _END),  # a whole JWT
    )


# 8+ characters with a letter and a digit, ending at a delimiter; not a variable, a path or a call
_VALUE = (
    r"(?![$/.~])((?=[^\s\"'`,;]*\d)(?=[^\s\"'`,;]*[A-Za-z])[A-Za-z0-9_\-+/=.!@#%^&*~]{8,})"
    r"(?=$|[\s\"'`,;])"
)
_NAME = (
    r"(?<![A-Za-z0-9])[A-Za-z0-9_-]*"
    r"(?:api[_-]?key|secret|token|passw(?:or)?d|passphrase|pwd|access[_-]?key|auth[_-]?key|private[_-]?key)"
    r"(?:[_-][A-Za-z0-9_-]*)?"
)


class AssignedSecretDetector(RegexBasedDetector):
    secret_type = "Secret assigned to a secret's name"
    denylist = (
        re.compile(_NAME + r"[\"']?\s*(?:=|:|:=|=>)\s*[\"']?" + _VALUE, re.IGNORECASE),
        re.compile(r"\bbearer\s+" + _VALUE, re.IGNORECASE),
        re.compile(r"\bpass(?:word|phrase|code)\s+(?:is|was)\s*:?\s*[\"']?" + _VALUE, re.IGNORECASE),
        # "with secret wJalr...", "the secret key is ...": a secret named in prose
        re.compile(
            r"\bsecret(?:\s+(?:access\s+)?key)?\s+(?:is\s+|was\s+)?:?\s*[\"']?" + _VALUE, re.IGNORECASE
        ),
        # credentials on a command line: curl's `-u user:PASSWORD` / `--user user:PASSWORD`, and
        # .netrc's `login NAME password PASSWORD` (no `=` or `:` before the value)
        re.compile(r"(?:^|\s)(?:-u|--user)[\s=][\"']?[^\s:\"']+:" + _VALUE),
        re.compile(r"\blogin\s+\S+\s+password\s+" + _VALUE, re.IGNORECASE),
        # the password of a URL (postgres://user:PASSWORD@host): detect-secrets' BasicAuth rule
        # takes none with a reserved character (!, $, &, ...) in it
        re.compile(
            r"\b[a-z][a-z0-9+.-]*://[^\s:/@\"'`]+:([^\s@/\"'`]{3,})@(?=[^\s@]*[.:/A-Za-z0-9])", re.IGNORECASE
        ),
    )
