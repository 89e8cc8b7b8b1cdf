"""Finding personal data (Presidio, no NLP model) and secrets (detect-secrets plugins) in a text.

Presidio's analyzer runs with its ``no_op`` NLP engine: its pattern and checksum recognizers
(e-mail, phone numbers through ``phonenumbers``, payment cards with the Luhn check, IPv4/IPv6,
IBAN, US SSN) work without a spaCy model; spaCy is imported, no model is loaded or downloaded.
Person names would need NER, which no offline package provides: they are not found.

Rules on top of the libraries, each because of a false redaction measured on benchmark rows:

- The e-mail recognizer's domain check goes through a ``tldextract`` that never fetches the
  public suffix list (the default one tries the network on first use); the bundled snapshot is used.
- Phone numbers (phones.py): a bare run of 10-12 digits is one only after a word such as "call",
  "phone" or "contact" (within 48 characters). Otherwise a phone number needs a format mark (``+``,
  a space, ``-``, ``.``, parentheses) and at least 10 digits (8 after a ``+``, 9 right after a
  phone label), three digit groups unless it opens with ``+``, ``(`` or a trunk ``0``, and no
  `` - `` between spaces: a bare run of digits is an id or a test value, ``3000 - 2920`` and
  ``23786-17509`` are arithmetic (GSM8K answers) and ``06-04-2020`` a date (HumanEval/124), far
  more often than any of them is a phone number.
- Cards: Presidio's pattern plus Mastercard's 2-series, JCB's 2131/1800 ranges and 12-19 digit
  runs (Maestro, 19-digit Visa), all Luhn-checked.
- Phone numbers: ``phonenumbers`` accepts only numbers valid in its metadata, so a number with an
  unassigned area code (what Faker makes, what a typo makes) or a ``001`` / ``x123`` dialling form
  is missed; a pattern for North-American and ``+``-international layouts adds those (its
  POSSIBLE leniency instead matched arithmetic and the digits of IP addresses).
- An IPv6 address needs three hex groups: ``l[::3]`` and ``1::2`` are Python slices
  (HumanEval/33, /37). An address that belongs to nobody (loopback, link-local, multicast, a
  netmask, a documentation range: addresses.py) is no personal data; a dotted quad, with or
  without its /prefix, is no phone number.
- Well-known test card numbers (Visa 4111 1111 1111 1111, Mastercard 5555 5555 5555 4444 ...) are
  not personal data anywhere.

- A bare run of digits that passes the Luhn check is a card only beside card words ("card",
  "visa", "payment", "account" ...): a 13-digit timestamp, an order number or a snowflake id passes
  one time in ten. A dotted quad after "version"/"build" (``__version__ = "4.2.0.1"``) or inside
  a longer dotted number (an SNMP OID) is not an IP address.
- personal_formats.py: lower-case IBANs, a labelled bare SSN, obfuscated e-mail addresses, a
  labelled date of birth.

Secrets: detect-secrets' pattern plugins (cloud and SaaS keys and tokens, JWTs, basic-auth URLs,
private-key headers) and its keyword plugin (``password = "..."``), plus two plugins of ours for
formats it lacks (secret_formats.py: vendor token prefixes; credentials.py's rules: values under a
secret's name, headers, command lines ...; blocks.py: a name and its value on different lines); PEM
and PGP private keys are taken whole (header to footer), a PuTTY key's private lines too, and an AWS
console CSV's secret column. Of a pattern plugin's match only the secret is replaced (``_core``):
its name, quotes and the rest of the line stay. Every finding
passes credentials.py's checks (a placeholder, ``...EXAMPLE`` or a run of one character is no
secret; a keyword-plugin value too short, a path or a name is none either). Its entropy plugins
are left out: they fire on every hash, UUID and base64 literal in code. Its public-IP plugin is
left out: Presidio finds IPs.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from ptfactory.filters.privacy.addresses import nobodys
from ptfactory.filters.privacy.blocks import block_secrets
from ptfactory.filters.privacy.credentials import (
    credible,
    csv_secrets,
    default_login,
    name_before,
    not_a_secret,
)
from ptfactory.filters.privacy.personal_formats import extra_personal
from ptfactory.filters.privacy.phones import LAYOUTS, plausible_phone
from ptfactory.filters.privacy.prose import prose_secrets

__all__ = ["SECRET_PLUGINS", "TEST_CARDS", "Finding", "find"]


@dataclass(frozen=True)
class Finding:
    kind: str  # the placeholder's type: EMAIL_ADDRESS, PHONE_NUMBER, ..., API_KEY, CREDENTIAL, PRIVATE_KEY
    start: int
    end: int
    value: str
    secret: bool


SECRET_PLUGINS = {
    "AWSKeyDetector": "API_KEY",
    "ArtifactoryDetector": "API_KEY",
    "AzureStorageKeyDetector": "API_KEY",
    "BasicAuthDetector": "CREDENTIAL",
    "CloudantDetector": "CREDENTIAL",
    "DiscordBotTokenDetector": "API_KEY",
    "GitHubTokenDetector": "API_KEY",
    "GitLabTokenDetector": "API_KEY",
    "IbmCloudIamDetector": "API_KEY",
    "IbmCosHmacDetector": "API_KEY",
    "JwtTokenDetector": "API_KEY",
    "MailchimpDetector": "API_KEY",
    "NpmDetector": "API_KEY",
    "OpenAIDetector": "API_KEY",
    "PypiTokenDetector": "API_KEY",
    "SendGridDetector": "API_KEY",
    "SlackDetector": "API_KEY",
    "SoftlayerDetector": "CREDENTIAL",
    "SquareOAuthDetector": "API_KEY",
    "StripeDetector": "API_KEY",
    "TelegramBotTokenDetector": "API_KEY",
    "TwilioKeyDetector": "API_KEY",
    "KeywordDetector": "CREDENTIAL",
    # detect-secrets plugins of ours for what its own miss (filters/privacy/secret_formats.py)
    "TokenFormatDetector": "API_KEY",
    "AssignedSecretDetector": "CREDENTIAL",
}
TEST_CARDS = frozenset(
    {
        "4111111111111111",
        "4242424242424242",
        "4012888888881881",
        "4000056655665556",
        "5555555555554444",
        "5105105105105100",
        "2223003122003222",
        "378282246310005",
        "371449635398431",
        "6011111111111117",
        "6011000990139424",
        "3056930009020004",
        "36227206271667",
        "3566002020360505",
        "6200000000000005",
    }
)
# PGP's "PRIVATE KEY BLOCK" too; a key cut before its footer: the key's lines after the header
# (base64, "Proc-Type: ..." headers), not the prose that follows; a header with no key material
# after it (`-----BEGIN OPENSSH PRIVATE KEY-----` named in a sentence) is no key (_keyed)
_PEM = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY(?: BLOCK)?-----(?:.*?-----END [A-Z ]*PRIVATE KEY(?: BLOCK)?-----|"
    r"(?:(?:\s|\\n)*(?:[A-Za-z0-9+/=]{16,}|[A-Za-z-]+: [^\n]*))+)",
    re.S,
)
_KEYED = re.compile(r"[A-Za-z0-9+/]{16,}")
# a PuTTY .ppk file's private part: the lines after Private-Lines, and its MAC
_PPK = re.compile(
    r"^Private-Lines:\s*\d+\s*\n((?:[A-Za-z0-9+/=]+\r?\n?)+(?:Private-(?:MAC|Hash):[^\n]*)?)", re.M
)
_HEX_GROUP = re.compile(r"[0-9A-Fa-f]+")
_VERSION_WORD = re.compile(  # also assigned: __version__ = "4.2.0.1", "version": "1.2.3.4"
    r"(?i)(?:\bv|\bversion|\bver\.?|\bbuild|\brelease|\bfirmware|\brev\.?|\boid)\s*$|version_*[\"']?\s*[:=]\s*[\"']?$"
)
_CARD_WORDS = re.compile(
    r"(?i)card|credit|debit|visa|master|amex|american express|discover|maestro|diners|jcb|unionpay|"
    r"\bcc\b|cc_?n|\bpan\b|payment|charged|billing|cvv|account|acct|kreditkarte|karte|carte|tarjeta|cartão"
)
# Presidio's card pattern misses Mastercard's 2-series and JCB's 2131/1800 numbers (Faker makes both)
# and 12-19 digit numbers (Maestro 0604.., 19-digit Visa) written as one run
_MORE_CARDS = (
    r"\b((2[2-7]\d{2})|(2131)|(1800))[- ]?(\d{3,4})[- ]?(\d{3,4})[- ]?(\d{3,5})\b|\b[0-6]\d{11,18}\b"
)


def _plausible(kind: str, value: str, text: str, start: int, end: int) -> bool:
    """The rules above: False for a match that is most likely not what its recognizer says."""
    value = value.strip()
    before, after = text[max(0, start - 48) : start], text[end : end + 24]
    if kind == "PHONE_NUMBER":
        return plausible_phone(value, text, start, end)
    if kind == "EMAIL_ADDRESS":
        # a URL's user part (https://oauth2:TOKEN@gitlab.com, mongodb+srv://admin:PW@cluster0...): its
        # password is a credential (credentials.py) and the host stays; an SSH remote
        # (git@github.com:acme/app.git) is a login at a host, not an address
        if re.search(r"://[^\s/@]*$", before):
            return False
        # a no-reply sender is a service's, nobody's (a GitHub users.noreply address names a user)
        if re.match(r"(?i)(?:no-?reply|do-?not-?reply)@", value):
            return False
        return not re.match(r":[\w~.-]+/", after)
    if kind == "IP_ADDRESS":
        if nobodys(value):  # loopback, link-local, multicast, a netmask, documentation (addresses.py)
            return False
        if ":" in value:
            return len(_HEX_GROUP.findall(value)) >= 3
        # a version (4.2.1.1, v10.0.19041.1) or a longer dotted number (an SNMP OID) is no address
        return not (_VERSION_WORD.search(before) or re.match(r"\.\d", after) or re.search(r"\d\.$", before))
    if kind == "CREDIT_CARD":
        if re.sub(r"\D", "", value) in TEST_CARDS:
            return False
        # one run of digits is a card only beside card words: a 13-digit timestamp, an order number
        # or a snowflake id passes the Luhn check one time in ten
        return not value.isdigit() or bool(_CARD_WORDS.search(before[-64:] + " " + after))
    return True


_LOCK = threading.Lock()


@cache
def _analyzer(entities: tuple[str, ...]) -> Any:
    """One Presidio analyzer per entity set, made once (its recognizers compile their patterns)."""
    import tldextract
    from presidio_analyzer import AnalyzerEngine, Pattern, PatternRecognizer, RecognizerRegistry
    from presidio_analyzer.nlp_engine import NoOpNlpEngine
    from presidio_analyzer.predefined_recognizers import (
        CreditCardRecognizer,
        EmailRecognizer,
        IbanRecognizer,
        IpRecognizer,
        PhoneRecognizer,
        UsSsnRecognizer,
    )

    offline = tldextract.TLDExtract(suffix_list_urls=(), cache_dir=None)

    class OfflineEmailRecognizer(EmailRecognizer):
        def validate_result(self, pattern_text: str) -> bool:
            return bool(offline(pattern_text).fqdn)

    made: dict[str, Callable[[], Any]] = {
        "EMAIL_ADDRESS": OfflineEmailRecognizer,
        "PHONE_NUMBER": PhoneRecognizer,
        "CREDIT_CARD": lambda: CreditCardRecognizer(
            patterns=[*CreditCardRecognizer.PATTERNS, Pattern("card (2-series, JCB)", _MORE_CARDS, 0.3)]
        ),
        "IP_ADDRESS": IpRecognizer,
        "IBAN_CODE": IbanRecognizer,
        "US_SSN": UsSsnRecognizer,
    }
    registry = RecognizerRegistry(supported_languages=["en"])
    for name in entities:
        registry.add_recognizer(made[name]())
    if "PHONE_NUMBER" in entities:
        registry.add_recognizer(
            PatternRecognizer(
                supported_entity="PHONE_NUMBER",
                name="PhoneLayoutRecognizer",
                patterns=[Pattern(name, layout, 0.4) for name, layout in LAYOUTS],
            )
        )
    engine = NoOpNlpEngine(models=[{"lang_code": "en", "model_name": "none"}])
    engine.load()
    return AnalyzerEngine(registry=registry, nlp_engine=engine, supported_languages=["en"])


@cache
def _plugins() -> tuple[tuple[Any, str], ...]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    from ptfactory.filters.privacy.secret_formats import AssignedSecretDetector, TokenFormatDetector

    plugins: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    by_name: dict[str, Any] = {plugin.__name__: plugin for plugin in plugins}
    by_name.update(TokenFormatDetector=TokenFormatDetector, AssignedSecretDetector=AssignedSecretDetector)
    return tuple((by_name[name](), kind) for name, kind in SECRET_PLUGINS.items())


# What every personal-data type needs somewhere in a text (an e-mail's @; the 8+ digits of a phone
# number, card, SSN or IBAN; an IPv4's dotted quad, an IPv6's hex groups; an IBAN's country and
# check digits): a text with none of them cannot hold a finding, and Presidio (whose import pulls
# spaCy and transformers: seconds) is never asked about it.
_MAYBE_PERSONAL = re.compile(
    r"@|\d(?:\D{0,4}\d){7,}|\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3}|[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:"
    r"|\b[A-Z]{2}\d{2}[ A-Z0-9]{11,}"
)


def _personal(text: str, entities: tuple[str, ...]) -> list[Finding]:
    # our rules for forms Presidio misses (cheap regular expressions: every text)
    found = [Finding(k, s, e, text[s:e], False) for k, s, e in extra_personal(text, entities)]
    if not _MAYBE_PERSONAL.search(text):
        return found
    for result in _analyzer(entities).analyze(
        text, language="en", entities=list(entities), score_threshold=0.3
    ):
        value = text[result.start : result.end]
        kind = result.entity_type
        if not _plausible(kind, value, text, result.start, result.end):
            continue
        start = result.start  # a key before an address (email=ci@x.fr) stays
        if kind == "EMAIL_ADDRESS" and "=" in value.split("@")[0]:
            start += value.rindex("=", 0, value.index("@")) + 1
        found.append(Finding(kind, start, result.end, text[start : result.end], secret=False))
    return found


def _secrets(text: str) -> list[Finding]:
    found = [
        Finding("PRIVATE_KEY", m.start(), m.end(), m.group(0), True)
        for m in _PEM.finditer(text)
        if _KEYED.search(m.group(0), m.group(0).index("KEY") + 3)
    ]
    found += [
        Finding("PRIVATE_KEY", m.start(1), m.end(), text[m.start(1) : m.end()], True)
        for m in _PPK.finditer(text)
    ]
    found += [Finding("CREDENTIAL", s, e, text[s:e], True) for s, e in csv_secrets(text)]
    found += [Finding("CREDENTIAL", s, e, text[s:e], True) for s, e in block_secrets(text)]
    found += [Finding("CREDENTIAL", s, e, text[s:e], True) for s, e in prose_secrets(text)]
    offset = 0
    for line in text.splitlines(keepends=True):
        for plugin, kind in _plugins():
            for at, end in _spans(plugin, kind, line):
                # Django's `django-insecure-` says what the key is: no part of the secret
                start = at + 16 if line.startswith("django-insecure-", at) and end - at > 24 else at
                value = line[start:end]
                if "PRIVATE KEY" in value or not_a_secret(value) or default_login(line, start, end):
                    continue
                found.append(Finding(kind, offset + start, offset + end, value, True))
        offset += len(line)
    return found


def _spans(plugin: Any, kind: str, line: str) -> list[tuple[int, int]]:
    """Where ``plugin`` finds secrets in ``line``."""
    name = type(plugin).__name__  # detect-secrets is imported on first use (_plugins), not here
    if name == "AssignedSecretDetector":
        return list(plugin.spans(line))
    if name == "TokenFormatDetector":  # ours: the value group where a rule has one
        return [m.span(1 if m.re.groups else 0) for rule in plugin.denylist for m in rule.finditer(line)]
    spans = []
    for secret in plugin.analyze_line(filename="row.py", line=line, line_number=1):
        value = secret.secret_value or ""
        if not value:
            continue
        # a pattern plugin may report only a group of its match (GitHub: the "ghp" prefix):
        # take the whole match that holds the reported value
        whole = [
            m.span()
            for pattern in getattr(plugin, "denylist", ())
            for m in pattern.finditer(line)
            if value in m.group(0) and kind != "CREDENTIAL"
        ]
        # a URL's password where it stands (not the scheme of postgres://postgres:postgres@...)
        at = line.find(value) if f":{value}@" not in line else line.find(f":{value}@") + 1
        if whole:
            spans += [_core(line, s, e, value) for s, e in whole]
        elif at >= 0 and (
            # the keyword plugin has no minimum length: `passwd = 'x'` is not a password
            name != "KeywordDetector" or credible(value, name_before(line, at))
        ):
            spans.append((at, at + len(value)))
    return spans


# what a pattern plugin's match holds around its secret: quotes and separators (Artifactory's
# `=AKC..."`), the rest of the line (npm's rule runs to the line's end), a name (`AccountKey=`)
_AROUND = re.compile(r"""[\s=:"'(\[]*(?:[A-Za-z_][\w.-]*=(?=\S{16}))?(?P<core>[^\s"'`]*)""")


def _core(line: str, start: int, end: int, value: str) -> tuple[int, int]:
    """The secret of a pattern plugin's match: only it is replaced, so the name, quotes, separators
    and the rest of the line stay (``aws_secret_access_key="<API_KEY>"`` still parses). A plugin
    that reports a long group (AWS's 40-character secret) gives it; one that reports a prefix (GitHub:
    ``ghp``) the match, less what stands around the secret; a Slack webhook URL its path after
    ``/services/`` (the ids and the token: together they are the webhook's address)."""
    if len(value) >= 16 and (at := line.find(value, start, end)) >= 0:
        start, end = at, at + len(value)
    m = _AROUND.match(line, start, end)
    if m and m.group("core"):
        start, end = m.span("core")
    if "://" in line[start:end]:  # a webhook URL: what follows Slack's /services/ (T../B../TOKEN)
        at = line.find("/services/", start, end)
        start = at + len("/services/") if at >= 0 else line.rindex("/", start, end) + 1
    return start, end


def find(text: str, entities: tuple[str, ...], secrets: bool = True) -> list[Finding]:
    """Non-overlapping findings in ``text``, in order (of overlapping ones, the longest; secrets
    before personal data of the same span)."""
    if not text or not text.strip():
        return []
    with (
        _LOCK
    ):  # detect-secrets keeps settings process-wide; Presidio's registry is not documented thread-safe
        found = (_secrets(text) if secrets else []) + (_personal(text, entities) if entities else [])
    found.sort(key=lambda f: (f.start, -(f.end - f.start), not f.secret))
    kept: list[Finding] = []
    for finding in found:
        if kept and finding.start < kept[-1].end:
            continue
        kept.append(finding)
    return kept
