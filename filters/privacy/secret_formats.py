"""Secret formats detect-secrets 1.5 lacks, as detect-secrets plugins (its documented extension
point: a ``RegexBasedDetector`` with a ``secret_type`` and a ``denylist``).

Each because a planted value went through to a stored row:

- ``TokenFormatDetector`` (API_KEY): today's token prefixes. detect-secrets' OpenAI plugin knows only
  the old ``sk-...T3BlbkFJ...`` key, and it has no rule for ``sk-proj-`` / ``sk-ant-`` keys, Google's
  ``AIza`` keys, Hugging Face's ``hf_``, GitHub's fine-grained ``github_pat_`` or bare ``npm_``
  tokens. Its GitHub rule takes exactly 36 characters after ``ghp_`` and left the tail of a longer
  token behind; its JWT rule stops after the payload and left the signature, and wants an ``eyJ``
  payload (a token whose header opens ``eyJhbGci`` is one whatever its payload). The prefixes are
  the vendors' (as gitleaks' rules list them); lengths are lower bounds, so a made-up key of the
  right shape is taken whole too.
  Also: Stripe's ``sk_``/``rk_`` keys whole (its rule takes 24 characters of today's ~100) and
  ``whsec_`` secrets, Discord tokens with a longer last part, Slack ``xapp-``, DigitalOcean
  ``dop_v1_``, Vault ``hvs.``, Atlassian ``ATATT``, New Relic ``NRAK-``, Groq ``gsk_``,
  Replicate ``r8_``, Linear ``lin_api_``, Notion ``ntn_``, Bitbucket ``ATBB``, Postman ``PMAK-``,
  Mailgun ``key-``, an Azure AD client secret (``...Q~...``), the token of a Discord or Teams
  webhook URL, and a Twilio auth token (32 hex digits) beside its ``AC`` account SID; an AWS secret
  key (40 characters) right after its ``AKIA``/``ASIA`` key id with no name of its own (a call's
  arguments); Docker Hub ``dckr_pat_``, Shopify ``shpat_``, PlanetScale ``pscale_``, Doppler
  ``dp.pt.``, Grafana ``glsa_``, Google OAuth ``ya29.``.

A value assigned to a secret's name, a password on a command line and the like are
``credentials.py``'s ``AssignedSecretDetector``.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Iterator

from detect_secrets.plugins.base import RegexBasedDetector

from ptfactory.filters.privacy.credentials import RULES, spans

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
        # a JWT whose payload is not JSON-first (a compact JWS): the header says what it is
        re.compile(r"\beyJhbGci[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{16,}" + _END),
        # Stripe secret and restricted keys: detect-secrets takes 24 characters, today's are ~100
        re.compile(r"\b[rs]k_(?:live|test)_[A-Za-z0-9]{20,}" + _END),
        re.compile(r"\bwhsec_[A-Za-z0-9+/=]{24,}" + _END),  # Stripe webhook signing secret
        re.compile(r"\bxapp-\d-[A-Za-z0-9-]{30,}" + _END),  # Slack app-level token
        re.compile(r"\bdo[por]_v1_[a-f0-9]{64}" + _END),  # DigitalOcean
        re.compile(r"\bhv[sb]\.[A-Za-z0-9_-]{24,}" + _END),  # HashiCorp Vault
        re.compile(r"\bATATT[A-Za-z0-9_=-]{30,}" + _END),  # Atlassian API token
        re.compile(r"\bNRAK-[A-Z0-9]{27}" + _END),  # New Relic user key
        re.compile(r"\bgsk_[A-Za-z0-9]{40,}" + _END),  # Groq
        re.compile(r"\br8_[A-Za-z0-9]{30,}" + _END),  # Replicate
        re.compile(r"\blin_api_[A-Za-z0-9]{40,}" + _END),  # Linear
        re.compile(r"\bntn_[A-Za-z0-9]{40,}" + _END),  # Notion
        # Discord bot token: detect-secrets wants exactly 27 characters in the last part and left
        # the tail of a longer one
        re.compile(r"\b[MNO][A-Za-z0-9_-]{23,27}\.[A-Za-z0-9_-]{6,7}\.[A-Za-z0-9_-]{27,}" + _END),
        re.compile(r"\bATBB[A-Za-z0-9_=.-]{28,}" + _END),  # Bitbucket app password
        re.compile(r"\bPMAK-[A-Za-z0-9]{20,}-[A-Za-z0-9]{30,}" + _END),  # Postman API key
        re.compile(r"\bkey-[0-9a-f]{32}" + _END),  # Mailgun API key
        # Azure AD client secret: 3 characters, a digit, Q~, 31-34 more
        re.compile(r"(?<![A-Za-z0-9_~.-])[A-Za-z0-9_~.]{3}\dQ~[A-Za-z0-9_~.-]{31,34}" + _END),
        # webhook URLs: the token part (the ids before it are no secret)
        re.compile(r"\bdiscord(?:app)?\.com/api/webhooks/\d+/([A-Za-z0-9_-]{40,})"),
        re.compile(r"\.webhook\.office\.com/webhookb2/[^\s\"'/]+/IncomingWebhook/([A-Za-z0-9]{32})/"),
        # Twilio's auth token: 32 hex digits, a secret only beside its account SID (AC + 32 hex)
        re.compile(r"\bAC[a-f0-9]{32}[\"']?\s*[,:;]?\s*[\"']?([a-f0-9]{32})\b"),
        # an AWS secret access key (40 characters) right after its access key id, nameless: the two
        # arguments of a call (NewStaticCredentialsProvider("AKIA...", "X", ""))
        # (or a chat's "enter AKIA... then X", "AKIA... / X")
        re.compile(
            r"\b(?:AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}[\"'`]?\s*[,:;/]?\s*(?:(?:and|then)\s+)?[\"'`]?"
            r"([A-Za-z0-9/+]{40})(?![\w/+=])"
        ),
        re.compile(r"\bdckr_pat_[A-Za-z0-9_-]{27,}" + _END),  # Docker Hub
        re.compile(r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}" + _END),  # Shopify
        re.compile(r"\bpscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.-]{32,}" + _END),  # PlanetScale
        re.compile(r"\bdp\.(?:pt|st|sa|ct|scim|audit)\.[A-Za-z0-9]{40,}" + _END),  # Doppler
        re.compile(r"\bglsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}" + _END),  # Grafana service account
        re.compile(r"\bya29\.[0-9A-Za-z_-]{30,}" + _END),  # Google OAuth access token
    )


class AssignedSecretDetector(RegexBasedDetector):
    """credentials.py's rules: a value assigned to a secret's name, a password on a command line ..."""

    secret_type = "Secret assigned to a secret's name"
    denylist = RULES

    def spans(self, line: str) -> Iterator[tuple[int, int]]:
        return spans(line)

    def analyze_string(
        self, string: str
    ) -> Generator[str, None, None]:  # only credible values, as spans() finds
        for start, end in spans(string):
            yield string[start:end]
