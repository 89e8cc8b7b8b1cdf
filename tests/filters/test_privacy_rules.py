"""The privacy rules on top of Presidio and detect-secrets: each form below went through to a stored
row (or a clean one was redacted) before its rule. Values are drawn at random per case, so a rule
that knows one string and not its shape fails here."""

from __future__ import annotations

import json
import random
import re
import string
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from ptfactory.filters.privacy import clean_samples, redact_seed, redact_seed_files, redact_text
from ptfactory.storage.schema import from_records, sample_id

ALNUM = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
_R = random.Random()


def _s(n: int, alphabet: str = ALNUM) -> str:
    """A random string that holds a letter and a digit (as a real key does)."""
    while True:
        value = "".join(_R.choice(alphabet) for _ in range(n))
        if set(alphabet) & set(string.digits) and not any(c.isdigit() for c in value):
            continue
        if set(alphabet) & set(string.ascii_letters) and not any(c.isalpha() for c in value):
            continue
        return value


def _pw(n: int = 12) -> str:
    return _s(n - 2) + _R.choice("!#%&*") + _R.choice(string.digits)


def _seeded(name: str) -> None:
    _R.seed(zlib.crc32(name.encode()))


def _gone(value: str, text: str) -> None:
    cleaned, counts = redact_text(text)
    assert value not in cleaned and counts, (text, cleaned)
    # no tail or head of the value is left behind either
    for part in (value[:10], value[-10:]):
        if len(value) > 16:
            assert part not in cleaned, (text, cleaned)


# --- 1. a short or placeholder value is not a secret; a value is replaced as a whole token -------

SHORT = {
    "one-letter": (
        "def connect(host):\n    passwd = 'x'\n    return db.connect(host=host, max_conn=max(1, 2))"
    ),
    "a-word-in-other-words": 'password = "test"\n# run the test suite with pytest',
    "one-digit": 'db:\n  password: "1"\n  port: 5432\n  replicas: 1',
    "one-vowel": "pwd = 'a'\nname = 'alpha beta gamma'",
    "placeholder": "api_key: REPLACE_ME_1\ntoken: <your-token-here>\npassword: changeme",
    "doc-example-key": "aws_access_key_id = AKIAIOSFODNN7EXAMPLE",
    "x-run": "OPENAI_API_KEY=sk-" + "x" * 48,
}


@pytest.mark.parametrize("name", list(SHORT))
def test_short_or_placeholder_values_are_not_secrets(name: str) -> None:
    text = SHORT[name]
    assert redact_text(text) == (text, {})


def test_a_found_value_is_replaced_only_where_it_stands_as_a_whole_token() -> None:
    _seeded("whole-token")
    value = _pw(10)
    text = f'password = "{value}"\nprint("{value}")\nlog("x{value}y")'
    cleaned, counts = redact_text(text)
    assert cleaned == f'password = "<CREDENTIAL>"\nprint("<CREDENTIAL>")\nlog("x{value}y")'
    assert counts == {"CREDENTIAL": 2}


# --- 2. partial leaks: the whole token ------------------------------------------------------------

WHOLE: dict[str, Callable[[], tuple[str, str]]] = {
    "stripe-live-long": lambda: (v := "sk_live_51" + _s(97), f"I used {v} in the dashboard"),
    "stripe-restricted": lambda: (v := "rk_live_51" + _s(97), f"require('stripe')('{v}');"),
    "stripe-test": lambda: (v := "sk_test_51" + _s(97), f"Stripe::setApiKey('{v}');"),
    "stripe-restricted-test": lambda: (v := "rk_test_" + _s(40), f"key {v}"),
    "discord-long-tail": lambda: (
        v := "MT" + _s(24) + "." + _s(6) + "." + _s(38, ALNUM + "_-"),
        f"client.run('{v}')",
    ),
    "twilio-auth-token": lambda: (
        v := _s(32, HEX),
        f'client = Client("AC{_s(32, HEX)}", "{v}")',
    ),
}


@pytest.mark.parametrize("name", list(WHOLE))
def test_tokens_are_redacted_whole_not_a_prefix_of_them(name: str) -> None:
    _seeded(name)
    _gone(*WHOLE[name]())


# --- 3-5. AWS, passwords, tokens and headers ----------------------------------------------------


def _aws() -> str:
    return _s(39, B64)


FORMS: dict[str, Callable[[], tuple[str, str]]] = {
    # AWS secret access keys
    "aws-slash-env": lambda: (
        v := "/" + _aws(),
        f"AWS_ACCESS_KEY_ID=AKIA{_s(16, 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567')}\nAWS_SECRET_ACCESS_KEY={v}\n",
    ),
    "aws-slash-yaml": lambda: (v := "/" + _aws(), f"aws:\n  secret_key: {v}\n"),
    "aws-slash-quoted": lambda: (v := "/" + _aws(), f'aws_secret_access_key = "{v}"'),
    "aws-configure": lambda: (
        v := _s(40, B64),
        f"$ aws configure\nAWS Access Key ID [None]: AKIA{_s(16, string.ascii_uppercase)}\n"
        f"AWS Secret Access Key [None]: {v}\nDefault region name [None]: us-east-1\n",
    ),
    "aws-prose-colon": lambda: (v := _s(40, B64), f"AWS Secret Access Key: {v}"),
    "aws-console-csv": lambda: (
        v := _s(40, B64),
        "User name,Password,Access key ID,Secret access key,Console login link\n"
        f"ci-bot,,AKIA{_s(16, string.ascii_uppercase)},{v},https://1.signin.aws.amazon.com/console\n",
    ),
    # passwords
    "short-7": lambda: (v := _s(6, string.ascii_lowercase) + "2", f"db:\n  password: {v}\n  port: 5432\n"),
    "short-6-env": lambda: (
        v := _s(6, string.ascii_lowercase + string.digits),
        f"DB_USER=app\nDB_PASSWORD={v}\n",
    ),
    "digits-only": lambda: (v := _s(8, string.digits), f"router admin password: {v}"),
    "letters-only": lambda: (v := _s(12, string.ascii_lowercase), f"database:\n  password: {v}\n"),
    "dollar": lambda: (v := "Pa$$" + _s(8), f"POSTGRES_PASSWORD={v}\n"),
    "colon": lambda: (v := "p@ss:" + _s(8), f"smtp:\n  password: {v}\n"),
    "db-pass": lambda: (v := _pw(), f"DB_HOST=db.internal\nDB_PASS={v}\n"),
    "json-parens": lambda: (v := "x(9)" + _s(8), f'{{"username": "svc", "password": "{v}"}}'),
    "pass-json": lambda: (v := _pw(), f'creds = {{"user": "admin", "pass": "{v}"}}'),
    "pass-chat": lambda: (v := _pw(), f"log in with user: admin, pass: {v}"),
    "passwd": lambda: (v := _pw(), f"passwd: {v}"),
    "pwd": lambda: (v := _pw(), f"PWD_ADMIN={v}"),
    "passphrase-words": lambda: (
        v := " ".join(_s(6, string.ascii_lowercase) for _ in range(4)),
        f"wifi:\n  passphrase: {v}\n",
    ),
    "xml": lambda: (v := _pw(), f"<datasource>\n  <password>{v}</password>\n</datasource>"),
    "php-define": lambda: (v := _pw(), f"define( 'DB_PASSWORD', '{v}' );"),
    "docker-login": lambda: (v := _s(16), f"$ docker login -u ci-bot -p {v} registry.gitlab.com"),
    "mysql-p": lambda: (v := _s(14), f"$ mysql -h db -u root -p{v} shop < dump.sql"),
    "sshpass": lambda: (v := _s(14), f"sshpass -p '{v}' ssh deploy@build-01 uptime"),
    "dash-dash-password": lambda: (v := _pw(), f"./manage.py createuser --password {v} admin"),
    "login-call": lambda: (v := _pw(10), f'client.login("admin", "{v}")'),
    "auth-tuple": lambda: (v := _pw(11), f'requests.get(url, auth=("deploy", "{v}"))'),
    "redis-empty-user": lambda: (v := _s(16), f"REDIS_URL=redis://:{v}@cache.internal:6379/0"),
    "go-dsn": lambda: (v := _s(14), f'sql.Open("mysql", "app:{v}@tcp(db.internal:3306)/shop")'),
    "pgpass": lambda: (v := _pw(), f"# ~/.pgpass\ndb.internal:5432:prod:app:{v}\n"),
    # tokens and headers
    "auth-basic": lambda: (v := _s(28, B64) + "=", f"GET / HTTP/1.1\nAuthorization: Basic {v}\n"),
    "auth-token": lambda: (v := _s(20), f'headers = {{"Authorization": "Token {v}"}}'),
    "auth-apikey": lambda: (v := _s(20), f"Authorization: ApiKey {v}"),
    "x-api-key": lambda: (v := _s(32), f"curl -H 'X-API-Key: {v}' https://api.example.com"),
    "cookie": lambda: (v := _s(32), f"Cookie: sessionid={v}; csrftoken=abc"),
    "azure-sas": lambda: (
        v := _s(43, B64) + "%3D",
        f"https://acct.blob.core.windows.net/c/b.bak?sv=2022-11-02&sp=r&sig={v}",
    ),
    "encryption-key": lambda: (v := _s(64, HEX), f"ENCRYPTION_KEY={v}"),
    "signing-key": lambda: (v := _s(48), f"jwt:\n  signing_key: {v}\n"),
    "app-key": lambda: (v := _s(43, B64) + "=", f"APP_KEY=base64:{v}"),
    "key-id-hex": lambda: (v := _s(40, HEX), f'{{"private_key_id": "{v}"}}'),  # a key's id: its own
    "json-key": lambda: (v := _s(32, HEX), f'{{"service": "geocoder", "key": "{v}"}}'),
    "whsec": lambda: (v := "whsec_" + _s(32), f"endpoint = '{v}'"),
    "xapp": lambda: (
        v := "xapp-1-"
        + _s(11, string.ascii_uppercase + string.digits)
        + "-"
        + _s(13, string.digits)
        + "-"
        + _s(64, HEX),
        f'SocketModeHandler(app, "{v}")',
    ),
    "digitalocean": lambda: (v := "dop_v1_" + _s(64, HEX), f"doctl auth init -t {v}"),
    "vault": lambda: (v := "hvs." + _s(90, ALNUM + "_-"), f"$ vault login {v}"),
    "atlassian": lambda: (v := "ATATT3xFfGF0" + _s(180, ALNUM + "_=-"), f"jira token {v}"),
    "newrelic": lambda: (v := "NRAK-" + _s(27, string.ascii_uppercase + string.digits), f"user key: {v}"),
    # values under a secret's name in code and configs (a held-out probe's leaks)
    "argparse-default": lambda: (
        v := "ATBB" + _s(32),
        f'parser.add_argument("--bb-app-password", default="{v}")',
    ),
    "option-default-generic": lambda: (
        v := _s(24),
        f'p.add_argument("--api-token", type=str, default="{v}")',
    ),
    "mailgun-kwarg": lambda: (v := "key-" + _s(32, HEX), f'send(domain="mg.acme.io", key="{v}", to=["x"])'),
    "terraform-default": lambda: (
        v := _s(32, HEX),
        f'variable "datadog_api_key" {{\n  type    = string\n  default = "{v}"\n}}\n',
    ),
    "yaml-folded": lambda: (v := _s(40), f"integrations:\n  pagerduty:\n    api_token: >-\n      {v}\n"),
    "java-setter": lambda: (v := _s(32), f'client.setApiKey("{v}");'),
    "rust-bearer-auth": lambda: (v := _s(40), f'reqwest::Client::new().get(url).bearer_auth("{v}").send()'),
    "okta-ssws": lambda: (v := "00" + _s(40), f'.header("Authorization", "SSWS {v}")'),
    "jdbc-positional": lambda: (
        v := _pw(),
        f'Connection c = DriverManager.getConnection(\n    "jdbc:postgresql://db:5432/ledger", "rw", "{v}");',
    ),
    "cli-api-key": lambda: (v := _s(32), f"python ingest.py --source s3://raw --api-key {v} --batch 500"),
    "az-login-p": lambda: (
        v := _s(3) + "1Q~" + _s(31, ALNUM + "_~."),
        f'az login --service-principal -u {_s(8, HEX)} -p "{v}" --tenant {_s(8, HEX)}',
    ),
    "azure-client-secret-bare": lambda: (v := _s(3) + "8Q~" + _s(34, ALNUM + "_~."), f"secret value {v}"),
    "query-appid": lambda: (
        v := _s(32, HEX),
        f'requests.get(f"https://api.w.org/data?q={{city}}&appid={v}")',
    ),
    "query-access-token": lambda: (v := _s(40), f"GET /v1/me?access_token={v}&fields=id HTTP/1.1"),
    "bytes-literal": lambda: (v := _pw(24), f'WEBHOOK_SECRET = b"{v}"'),
    "go-byte-slice": lambda: (v := _s(64, HEX), f'var hmacKey = []byte("{v}")'),
    "sql-identified-by": lambda: (v := _pw(), f"CREATE USER 'app'@'%' IDENTIFIED BY '{v}';"),
    "sql-with-password": lambda: (v := _pw(), f"CREATE ROLE app LOGIN WITH PASSWORD '{v}';"),
    "json-escaped": lambda: (
        v := _pw(),
        f'body="{{\\"user\\":\\"ops\\",\\"password\\":\\"{v}\\"}}" status=401',
    ),
    "url-password-with-at": lambda: (
        v := _s(4) + "@" + _s(3) + "#" + _s(3) + "!",
        f"Connecting to amqp://svc:{v}@rabbit-01:5672//",
    ),
    "go-dsn-with-at": lambda: (
        v := _s(9) + "@" + _s(2),
        f'sql.Open("mysql", "billing:{v}@tcp(db:3306)/billing")',
    ),
    "discord-webhook": lambda: (
        v := _s(68, ALNUM + "_-"),
        f'requests.post(f"https://discord.com/api/webhooks/{_s(19, string.digits)}/{v}?wait=true")',
    ),
    "sentry-dsn-key-as-user": lambda: (
        v := _s(32, HEX),
        f'sentry_sdk.init(dsn="https://{v}@o450123.ingest.sentry.io/5512345")',
    ),
    "bitbucket-atbb": lambda: (v := "ATBB" + _s(32), f"use {v} as the app password"),
    "postman-pmak": lambda: (v := f"PMAK-{_s(24, HEX)}-{_s(34, HEX)}", f"Set X-Api-Key to {v} in Postman."),
    "docker-config-auth": lambda: (
        v := _s(52, B64),
        f'{{"auths": {{"registry.acme.io": {{"auth": "{v}"}}}}}}',
    ),
    "markdown-table": lambda: (
        v := _pw(),
        f"| env | user | password |\n|---|---|---|\n| prod | admin | {v} |\n",
    ),
    "markdown-key-value": lambda: (
        v := _pw(),
        f"| setting | value |\n|---|---|\n| host | db01 |\n| password | {v} |\n",
    ),
    # more command lines and calls of the same kinds
    "redis-cli-a": lambda: (v := _s(16), f"redis-cli -h cache.internal -a {v} ping"),
    "ldapsearch-w": lambda: (v := _pw(), f"ldapsearch -x -D cn=admin,dc=acme -w {v} -b dc=acme"),
    "sqlcmd-P": lambda: (v := _pw(), f'sqlcmd -S db01 -U sa -P "{v}" -Q "SELECT 1"'),
    "openssl-pass": lambda: (v := _s(14), f"openssl pkcs12 -export -in c.pem -passout pass:{v} -out c.p12"),
    "keytool-storepass": lambda: (v := _s(14), f"keytool -list -keystore ks.jks -storepass {v}"),
    "aws-configure-set": lambda: (v := _s(40, B64), f"aws configure set aws_secret_access_key {v}"),
    "setx": lambda: (v := _s(32), f'setx OPENAI_API_KEY "{v}"'),
    "network-credential": lambda: (v := _pw(), f'var c = new NetworkCredential("svc", "{v}");'),
    "powershell-securestring": lambda: (
        v := _pw(),
        f'$pw = ConvertTo-SecureString "{v}" -AsPlainText -Force',
    ),
    "net-use": lambda: (v := _pw(), f"net use Z: \\\\fs01\\finance /user:CORP\\svc {v} /persistent:no"),
    "htpasswd-b": lambda: (v := _pw(), f"htpasswd -b /etc/nginx/.htpasswd admin {v}"),
    "pgp-block": lambda: (
        v := "\n".join(_s(64, B64) for _ in range(3)),
        f"-----BEGIN PGP PRIVATE KEY BLOCK-----\n\n{v}\n-----END PGP PRIVATE KEY BLOCK-----\n",
    ),
    "putty-ppk": lambda: (
        v := "\n".join(_s(64, B64) for _ in range(3)),
        "PuTTY-User-Key-File-3: ssh-rsa\nEncryption: none\nComment: k\nPublic-Lines: 1\n"
        f"{_s(64, B64)}\nPrivate-Lines: 3\n{v}\nPrivate-MAC: {_s(64, HEX)}\n",
    ),
}


@pytest.mark.parametrize("name", list(FORMS))
def test_secret_forms_are_redacted(name: str) -> None:
    _seeded(name)
    value, text = FORMS[name]()
    for line in value.splitlines():
        _gone(line, text)


# --- 6. personal data ----------------------------------------------------------------------------

PII: dict[str, tuple[str, str, str]] = {
    "iban-lower": ("nl91abna0417164300", "mijn iban is nl91abna0417164300", "IBAN_CODE"),
    "iban-lower-spaced": ("de89 3704 0044 0532 0130 00", "iban: de89 3704 0044 0532 0130 00", "IBAN_CODE"),
    "ssn-bare": ("536228471", "ssn=536228471", "US_SSN"),
    "email-words": (
        "john dot smith at protonmail dot com",
        "reach me at john dot smith at protonmail dot com",
        "EMAIL_ADDRESS",
    ),
    "email-brackets": (
        "k.ivanova[at]mail-service[dot]ru",
        "Contact: k.ivanova[at]mail-service[dot]ru",
        "EMAIL_ADDRESS",
    ),
    "email-paren": ("anna.k (at) posteo.de", "reach me: anna.k (at) posteo.de", "EMAIL_ADDRESS"),
    "email-url-encoded": (
        "jane.ostrowski%40gmail.com",
        "sent https://app.acme.io/invite?email=jane.ostrowski%40gmail.com&ref=news",
        "EMAIL_ADDRESS",
    ),
    "whatsapp-link": (
        "919845031276",
        '<a href="https://wa.me/919845031276?text=Hi">Chat</a>',
        "PHONE_NUMBER",
    ),
    "dob-us": ("03/14/1987", "Patient DOB: 03/14/1987, MRN 004512", "DATE_OF_BIRTH"),
    "dob-json": ("1979-11-02", '{"name": "T", "date_of_birth": "1979-11-02"}', "DATE_OF_BIRTH"),
}


@pytest.mark.parametrize("name", list(PII))
def test_personal_data_in_less_usual_forms_is_redacted(name: str) -> None:
    value, text, kind = PII[name]
    cleaned, counts = redact_text(text)
    assert value not in cleaned and counts.get(kind), (text, cleaned, counts)


# --- 7. no false redaction ----------------------------------------------------------------------

BENIGN = [
    "ssl:\n  private_key_path: certs/server2048.key\n  cert_path: certs/server2048.crt",
    "password_min_length: 12\npassword_hash_algorithm: argon2id\nsecret_rotation_days: 90",
    "password_reset_template: emails/reset_v2.html",
    "secret_id: prod/db-creds-2024",
    "private_key_file = 'keys/deploy_ed25519'",
    "SECRET_ROTATION_LAMBDA=rotate-db-creds-v2",
    'session_token_id = "9b2c4d1e-7f3a-4c2b-8e1d-2a3b4c5d6e7f"',
    'API_KEY_HEADER = "X-API-Key-v2"',
    '{"created_at": 1717171717174, "status": "ok"}',
    "GUILD_ID = 1191234567890123450",
    "Order #4000123412341234 shipped.",
    "Upgrade the driver to version 4.2.1.1 (build 10.0.19041.1)",
    "snmpwalk -v2c -c public host 1.3.6.1.2.1.1.1",
    "password = getpass.getpass()\nuser_password = form.password.data\npassword: str",
    "mkdir -p build/out && docker run -p 8080:80 img && ssh -p 2222 host",
    "Pass the key with --password-file /run/secrets/pw or --password $PW.",
    "openssl enc -aes256 -pass env:MYPASS -in a.txt && openssl rsa -passin file:/run/pw.txt",
    "if token == 'EOS1234567':\n    bypass: true",
    'login(username, password)\nauth=("user", password)',
    "We met at noon at the station and talked about the project.",
    'FIELDS = ("password", "username")\nclass Login(BaseModel):\n    password: SecretStr',
    "Hans Zimmer was born on September 12, 1957, in Frankfurt.",  # a public biography
    "Born in 1987, she moved to Berlin in 03/2001.",
    "git remote add origin git@github.com:acme/app.git",  # an SSH remote, not an e-mail address
    "| token | color |\n|---|---|\n| primary | #3b82f6 |\n| danger | #ef4444 |",  # design tokens
    "See ISBN 978-0-306-40615-7 (or ISBN-10 0-306-40615-2) for the derivation.",
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 Chrome/124.0.6367.207 Safari/537.36",
    "Point the A record at 203.0.113.10 (or 198.51.100.7, 192.0.2.1): documentation addresses.",
    "Emails come from noreply@github.com or no-reply@accounts.google.com; whitelist them.",
]


@pytest.mark.parametrize("text", BENIGN)
def test_names_paths_ids_and_versions_are_not_secrets_or_personal_data(text: str) -> None:
    assert redact_text(text) == (text, {})


def test_a_bare_luhn_number_is_a_card_only_with_card_words_nearby() -> None:
    cleaned, counts = redact_text("Charge the card 4539578763621486 today.")
    assert cleaned == "Charge the card <CREDIT_CARD> today." and counts == {"CREDIT_CARD": 1}
    assert redact_text("4539 5787 6362 1486")[1] == {"CREDIT_CARD": 1}  # grouped like a card


# --- 8. the seed path ----------------------------------------------------------------------------


def test_a_numeric_answer_equal_to_a_found_value_is_redacted(tmp_path: Path) -> None:
    task = {
        "id": "s3",
        "instruction": "What number should the customer call? Text: call Omar at 4158675309.",
        "response": "4158675309",
        "answer": 4158675309,
    }
    cleaned, counts = redact_seed(task)
    assert "4158675309" not in json.dumps(cleaned) and counts == {"PHONE_NUMBER": 3}
    assert cleaned["answer"] == "<PHONE_NUMBER>"
    # the same number written another way in the text
    spaced = {**task, "instruction": "Text: call Omar at 415 867 5309.", "response": "415 867 5309"}
    assert redact_seed(spaced)[0]["answer"] == "<PHONE_NUMBER>"
    seed = tmp_path / "s.jsonl"
    seed.write_text(json.dumps(task) + "\n" + json.dumps({"id": "s4", "answer": 18}) + "\n")
    staged = redact_seed_files([seed])
    assert b"4158675309" not in staged.contents["s.jsonl"] and b'"answer": 18' in staged.contents["s.jsonl"]


def test_a_code_seed_with_mbpps_list_of_tests_is_redacted(tmp_path: Path) -> None:
    """MBPP's tests are a list of assert lines: redaction read them as one text and crashed."""
    task = {
        "id": "m1",
        "kind": "code",
        "instruction": "Write is_email(s). Ask jane.doe@mailbox.org if unsure.",
        "response": "def is_email(s):\n    return '@' in s\n",
        "tests": ["assert is_email('bob@site.net')", "assert not is_email('nope')"],
    }
    seed = tmp_path / "mbpp.jsonl"
    seed.write_text(json.dumps(task) + "\n")
    text = redact_seed_files([seed]).contents["mbpp.jsonl"].decode()
    cleaned, counts = redact_seed(task)
    assert "jane.doe@mailbox.org" not in json.dumps(cleaned) and counts
    assert cleaned["tests"] == task["tests"]  # the tests' own address is test data
    assert "jane.doe@mailbox.org" not in text


def test_a_code_seed_whose_redaction_breaks_the_code_is_routed() -> None:
    from ptfactory.filters.privacy import record_redactions

    task = {
        "id": "c2",
        "kind": "code",
        "entry_point": "account",
        "instruction": "Write account() that returns the customer's card number.",
        "response": "def account():\n    return 4539578763621486  # the card on file\n",
        "tests": "def check(candidate):\n    assert candidate() > 0\n",
    }
    cleaned, counts = redact_seed(task)
    assert counts == {"CREDIT_CARD": 1}
    messages = [
        {"role": "user", "content": cleaned["instruction"]},
        {"role": "assistant", "content": cleaned["response"]},
    ]
    row = {
        "sample_id": sample_id("code", messages),
        "batch": "b",
        "kind": "code",
        "messages": messages,
        "tests": cleaned["tests"],
        "entry_point": "account",
    }
    out, _ = record_redactions(from_records([row]), [counts])
    decision = out.column("decisions").to_pylist()[0][-1]
    assert (decision["verdict"], decision["reason"]) == ("route", "redaction_breaks_code")
    # the same seed through the sample stage is routed alike
    out, _ = clean_samples(
        from_records(
            [
                {
                    **row,
                    "messages": [
                        {"role": "user", "content": task["instruction"]},
                        {"role": "assistant", "content": task["response"]},
                    ],
                }
            ]
        )
    )
    assert out.column("decisions").to_pylist()[0][-1]["reason"] == "redaction_breaks_code"


# --- 9. only the value is replaced: its name, quotes, separators and the rest of the line stay -----

AROUND: dict[str, Callable[[], tuple[list[str], str]]] = {
    "aws-kwargs": lambda: (
        v := ["AKIA" + _s(16, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"), _s(40, B64)],
        f's3 = boto3.client(\n    "s3",\n    aws_access_key_id="{v[0]}",\n    aws_secret_access_key="{v[1]}",\n)\n',
    ),
    "azure-account-key": lambda: (
        v := [_s(86, B64) + "=="],
        f'CONN = "DefaultEndpointsProtocol=https;AccountName=acme;AccountKey={v[0]};EndpointSuffix=core.windows.net"',
    ),
    "django-insecure": lambda: (
        v := [_s(50, string.ascii_lowercase + string.digits + "!@#$%^&*(-_=+)")],
        f"SECRET_KEY = 'django-insecure-{v[0]}'\nDEBUG = False\n",
    ),
    "npmrc-echo": lambda: (
        v := ["npm_" + _s(36)],
        f'command: echo "//registry.npmjs.org/:_authToken={v[0]}" > ~/.npmrc',
    ),
    "artifactory-withenv": lambda: (
        v := ["AKCp" + _s(69)],
        f"withEnv([\"ARTIFACTORY_API_KEY={v[0]}\"]) {{ sh './gradlew publish' }}",
    ),
    "query-next-parameter": lambda: (
        v := [_s(12)],
        f"GET https://legacy.acme.io/login.php?user=admin&pass={v[0]}&remember=1 -> 302",
    ),
    "slack-webhook": lambda: (
        v := [f"T{_s(8, string.ascii_uppercase)}/B{_s(10)}/{_s(24)}"],
        f'const HOOK = "https://hooks.slack.com/services/{v[0]}";',
    ),
    "gitlab-clone-url": lambda: (
        v := ["glpat-" + _s(20)],
        f"git clone https://oauth2:{v[0]}@gitlab.com/acme-platform/infra-live.git",
    ),
    "mongodb-srv": lambda: (
        v := [_s(12, ALNUM + "-_")],
        f"uri: 'mongodb+srv://admin:{v[0]}@cluster0.q7x2m.mongodb.net/shop?retryWrites=true'",
    ),
    "gitconfig-insteadof": lambda: (
        v := ["ghs_" + _s(36)],
        f'[url "https://x-access-token:{v[0]}@github.com/"]\n\tinsteadOf = https://github.com/',
    ),
    "hf-notebook-source": lambda: (
        v := ["hf_" + _s(34)],
        f'"source": [\n    "!huggingface-cli login --token {v[0]}\\n",\n    "import datasets"\n]',
    ),
}


@pytest.mark.parametrize("name", list(AROUND))
def test_only_the_value_is_replaced_not_its_name_quotes_or_the_rest_of_the_line(name: str) -> None:
    _seeded(name)
    values, text = AROUND[name]()
    cleaned, counts = redact_text(text)
    expected = text
    for value in values:
        expected = expected.replace(value, "<V>")
    assert re.sub(r"<[A-Z][A-Z_]*?(?:_\d+)?>", "<V>", cleaned) == expected, (text, cleaned)
    assert counts


def test_prose_then_a_fenced_code_block_that_redaction_breaks_is_routed() -> None:
    """The solution joins the prose prompt to the code and does not parse before redaction; the
    fenced block alone does, and a placeholder in place of an int literal breaks it."""
    answer = "Here it is:\n```python\nCARD_ON_FILE = 4539578763621486  # the customer's card\n```\n"
    messages = [
        {"role": "user", "content": "Write the settings module with the card number on file."},
        {"role": "assistant", "content": answer},
    ]
    row = {
        "sample_id": sample_id("code", messages),
        "batch": "b",
        "kind": "code",
        "messages": messages,
        "tests": "def check(candidate):\n    assert True\n",
        "entry_point": "",
    }
    out, stats = clean_samples(from_records([row]))
    decision = out.column("decisions").to_pylist()[0][-1]
    assert (decision["verdict"], decision["reason"]) == ("route", "redaction_breaks_code")
    assert stats.routed == 1


# --- 9. code that names a secret without holding one; prose and multi-line passwords ------------

CODE_NOT_SECRETS = [
    "def set_password(self, raw_password):\n    self.password = make_password(raw_password)\n"
    "    self._password = raw_password\n",
    "password = raw_password\nuser.password = new_password\naccount.password = hashed_password\n",
    "MAX_PASSWORD_LENGTH = 128\nTOKEN_EXPIRY_SECONDS = 3600\nPASSWORD_RESET_TIMEOUT = 259200\n"
    "LOGIN_ATTEMPTS_MAX = 5\nSESSION_TOKEN_TTL = 86400\n",
    "DATABASE_URL=postgresql://USER:PASSWORD@HOST:5432/DBNAME",
    'def test_login(client, user_password):\n    resp = client.post("/login", data={"password": user_password})\n',
    "Keep your password to yourself, and change it every 90 days.",
    "The password is stored as a hash; see the docs for version 2.4.1 details.",
]


@pytest.mark.parametrize("text", CODE_NOT_SECRETS)
def test_a_variable_or_setting_named_as_a_secret_is_not_one(text: str) -> None:
    assert redact_text(text) == (text, {})


def test_only_the_quoted_value_goes_not_the_variable_that_holds_it() -> None:
    v = _pw(14)
    text = f'val dbPassword = "{v}"\nval cfg = Config(password = dbPassword)\npassword = dbPassword\n'
    cleaned, _ = redact_text(text)
    assert v not in cleaned and cleaned.count("password = dbPassword") == 2, cleaned


PROSE: dict[str, Callable[[], tuple[str, str]]] = {
    "js-fallback": lambda: (v := _s(40), f"const JWT_SECRET = process.env.JWT_SECRET || '{v}';"),
    "python-or-fallback": lambda: (
        v := _s(40),
        f'JWT_SECRET = os.environ.get("JWT_SECRET") or "{v}"',
    ),
    "k8s-env": lambda: (
        v := _pw(),
        f'      env:\n        - name: DB_PASSWORD\n          value: "{v}"\n',
    ),
    "changed-to": lambda: (v := _pw(), f"I changed the admin password to {v} after the audit."),
    "pw-colon": lambda: (v := _pw(16), f"login: yusuf.novak / pw: {v}"),
    "no-punctuation": lambda: (v := _pw(), f"use username admin password {v} for the router page"),
    "german": lambda: (v := _pw(), f"das Passwort für den Server lautet {v} – bitte nicht weitergeben."),
    "spanish": lambda: (v := _pw(), f"La contraseña del correo es {v}, cámbiala cuando puedas."),
    "credentials-are": lambda: (v := _pw(), f"The test box credentials are root/{v}, ssh on port 2222."),
    "passcode": lambda: (v := _pw(), f"Please use the passcode {v} to enter the meeting."),
    "set-it-to": lambda: (v := _pw(), f"When it asks for a master password, set it to {v} like before."),
    "chat-reply": lambda: (v := _pw(), f"[10:42] anna: whats the pw for the drive\n[10:43] ben: {v}\n"),
    "passphrase-above": lambda: (v := _pw(), f"passphrase for the above: {v}"),
    "netrc-lines": lambda: (
        v := _s(36),
        f"machine api.heroku.com\n  login ci-bot\n  password {v}\n",
    ),
    "subscription-key-header": lambda: (v := _s(32, HEX), f'curl -H "Ocp-Apim-Subscription-Key: {v}" url'),
    "wp-salt": lambda: (
        v := _s(20) + " ]m3[Nw{k;TJQ)}is9=&;*]n{4 0" + _s(10),
        f"define( 'NONCE_SALT', '{v}' );\ndefine( 'WP_DEBUG', false );",
    ),
    "refresh-token-parens": lambda: (v := "1//0" + _s(60, ALNUM + "_-"), f"(refresh_token={v})"),
    "npm-legacy-auth": lambda: (v := _s(28, B64), f"_auth={v}\nalways-auth=true\n"),
    "sdk-client-key": lambda: (
        v := "eX" + _s(38),
        f'co = cohere.Client("{v}")\nprint(co.chat(message="hi"))',
    ),
    "smtp-url-user-with-at": lambda: (
        v := _pw(),
        f"EMAIL_URL=smtp+tls://mailer@gmail.com:{v}@smtp.acme.com:587",
    ),
}


@pytest.mark.parametrize("name", list(PROSE))
def test_fallbacks_prose_and_multiline_passwords_are_redacted(name: str) -> None:
    _seeded(name)
    value, text = PROSE[name]()
    cleaned, counts = redact_text(text)
    assert value not in cleaned and counts, (text, cleaned)


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("email=ci@orange.fr\n", "email="),
        ("user=liamoka@fastmail.com\n", "user="),
        (
            f"https://app.acme.io/cb#access_token={'Ab12Cd34Ef56Gh78'}&token_type=bearer&expires_in=3600",
            "&token_type=bearer&expires_in=3600",
        ),
        ("define( 'AUTH_KEY', 'put your unique phrase here' );", "put your unique phrase here"),
    ],
)
def test_the_name_and_what_follows_a_value_stay(text: str, kept: str) -> None:
    cleaned, _ = redact_text(text)
    assert kept in cleaned, cleaned


@pytest.mark.parametrize(
    "code",
    [
        "async hashPassword(password: string): Promise<string> {\n  return bcrypt.hash(password, 10);\n}",
        "fun login(username: String, password: String): Boolean = check(username, password)",
        "data class User(val password: String? = null)",
        "def connect(password: str, token: Optional[str] = None) -> None: ...",
        "db_password: !vault |\n  $ANSIBLE_VAULT;1.1;AES256\n",
        'def test_login(client):\n    client.post("/login", data={"password": "test-password"})',
    ],
)
def test_a_type_a_yaml_tag_or_a_fake_fixture_is_no_secret(code: str) -> None:
    """A parameter's type was taken for a password and `)` and `:` went with it: the code broke."""
    assert redact_text(code)[0] == code


@pytest.mark.parametrize(
    ("template", "name"),
    [
        ('password = "{v}"', "dotted, quoted"),
        ("DB_PASSWORD={v}", "dotted, .env"),
        ('const SMTP_PASSWORD: &str = "{v}";', "Rust typed constant"),
        ('export const API_TOKEN: string = "{v}";', "TypeScript typed constant"),
        ('API_KEY: str = "{v}"', "Python annotated"),
        ('def connect(host: str, password: str = "{v}"):', "annotated default"),
    ],
)
def test_a_dotted_value_or_a_typed_declaration_is_redacted(template: str, name: str) -> None:
    _seeded(name)
    value = _s(5) + "." + _s(8)
    text = template.format(v=value)
    assert value not in redact_text(text)[0], text


# --- 10. a second held-out probe: long values, prefixed string calls, more forms, nobody's addresses


LONG: dict[str, Callable[[], tuple[str, str]]] = {
    "der-key-env": lambda: (
        v := "MIIEvQIBADANBgkqhkiG9w0BAQEFAASC" + _s(1600, B64),
        f"JWT_PRIVATE_KEY={v}\n",
    ),
    "base64-yaml": lambda: (v := "ewogICJ0eXBlIjog" + _s(2400, B64), f"env:\n  GOOGLE_CREDENTIALS: {v}\n"),
    "session-token-313": lambda: (v := "FwoGZXIvYXdzE" + _s(300, B64), f"AWS_SESSION_TOKEN={v}\n"),
    "quoted-400": lambda: (v := _s(400), f'client.setApiKey("{v}");'),
}


@pytest.mark.parametrize("name", list(LONG))
def test_a_long_secret_value_is_replaced_through_its_end(name: str) -> None:
    """The value rules stopped at 300 characters and left the tail of a longer key behind."""
    _seeded(name)
    _gone(*LONG[name]())


@pytest.mark.parametrize(
    "code",
    [
        "password_hash = sha256(b'abc').hexdigest()",
        'auth_token = b64encode(f"{user}:{secret}".encode()).decode()',
        'session_token = blake2b(b"%s:%d" % (uid, ts), digest_size=16).hexdigest()',
        "api_key = normalise(rb'\\d+')",
        'secret=hmac.new(B"k", msg).digest()',
        'token = render(u"{0}", x)',
    ],
)
def test_a_call_with_a_prefixed_string_argument_is_code_not_a_secret(code: str) -> None:
    """`sha256(b` was read as a value cut at its quote: the code broke."""
    assert redact_text(code) == (code, {})


PROBE_FORMS: dict[str, Callable[[], tuple[str, str]]] = {
    "redis-cli-port-then-a": lambda: (v := _pw(), f"redis-cli -h cache.acme.io -p 6379 -a '{v}' FLUSHALL"),
    "ldapsearch-port-then-w": lambda: (v := _pw(), f"ldapsearch -h ldap01 -p 389 -D cn=admin -w {v}"),
    "httpie-a": lambda: (v := _pw(), f"http -a ops:{v} GET https://grafana.acme.io/api/dashboards"),
    "httpie-auth": lambda: (v := _pw(), f"https --auth ops:{v} api.acme.io/v1/me"),
    "credentials-spaced-slash": lambda: (v := _pw(), f"Credentials: admin / {v}"),
    "smbclient-U": lambda: (v := _pw(), f"smbclient //fs01/share -U 'CORP\\backup%{v}' -c 'ls'"),
    "sqlplus": lambda: (v := _pw(), f"sqlplus scott/{v}@//db.acme.io:1521/ORCL @report.sql"),
    "spring-xml-property": lambda: (
        v := _pw(),
        f'<bean id="ds">\n  <property name="username" value="app"/>\n  <property name="password" value="{v}"/>\n</bean>',
    ),
    "hibernate-property": lambda: (
        v := _pw(),
        f'<property name="hibernate.connection.password">{v}</property>',
    ),
    "chat-my-pass-is": lambda: (v := _pw(), f"[11:20] raj: fine, my pass is {v} just log in and fix it"),
    "wifi-key": lambda: (v := _pw(), f"Guest Wi-Fi: ACME-Guest, key: {v}"),
    "curl-b-cookie": lambda: (
        v := _s(36),
        f"curl -b 'sessionid={v}; csrftoken=abc' https://app.acme.io/admin/",
    ),
    "curl-cookie": lambda: (v := _s(36), f'curl --cookie "theme=dark; connect.sid={v}" https://app.acme.io/'),
    "linear": lambda: (v := "lin_api_" + _s(40), f'LINEAR = "{v}"'),
    "notion": lambda: (v := "ntn_" + _s(46, string.digits), f'new Client({{ auth: "{v}" }});'),
}


@pytest.mark.parametrize("name", list(PROBE_FORMS))
def test_more_command_config_and_chat_forms_are_redacted(name: str) -> None:
    _seeded(name)
    _gone(*PROBE_FORMS[name]())


@pytest.mark.parametrize(
    "text",
    [
        "If the tests pass, merge it; the pass is free for members.",
        "My boarding pass is on my phone.",
        "redis-cli -h cache.acme.io -p 6379 ping",
        '<input type="password" name="password" value="{{ form.password }}"/>',
        # placeholders in prose
        "Set the password to ${DB_PASSWORD_V2} in your shell.",
        "Then change the admin password to <NEW_PASSWORD_1> and restart.",
        "Set the password to %DB_PASSWORD_2% on Windows.",
        # addresses that belong to nobody
        'ALLOWED = ["192.0.2.10", "198.51.100.7", "203.0.113.0/24"]',
        'cidr_blocks = ["0.0.0.0/0"]',
        "address 192.0.2.10 netmask 255.255.255.0 broadcast 255.255.255.255",
        'r = requests.get("http://169.254.169.254/latest/meta-data/iam/security-credentials/")',
        "mDNS uses 224.0.0.251 on port 5353; multicast is 224.0.0.0/4, ff02::fb on IPv6.",
        "Use 2001:db8::1 and 2001:db8:85a3::8a2e:370:7334 in examples (2001:db8::/32).",
        '__version__ = "4.2.0.1"\nVERSION = "10.0.19041.1"\n{"version": "1.2.3.4"}',
    ],
)
def test_placeholders_english_pass_and_nobodys_addresses_are_left(text: str) -> None:
    assert redact_text(text) == (text, {})


def test_an_address_that_names_somebody_is_still_redacted() -> None:
    cleaned, counts = redact_text(
        "ssh from 10.20.30.40 and 81.2.69.160 (2a02:1810:4f2:7d00::1), mask 255.255.255.0"
    )
    assert counts == {"IP_ADDRESS": 3} and "255.255.255.0" in cleaned, cleaned
