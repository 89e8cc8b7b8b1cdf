"""Held-out round 6: forms a fresh battery of planted secrets and personal data found going through
(or clean texts changed). Values are drawn per case, so a rule that knows one string fails here."""

from __future__ import annotations

import ast
import string

import pytest

from ptfactory.filters.privacy import redact_text
from tests.filters.privacy.planted import ALNUM, a_password, drawn, gone, kept, rng

# --- secrets -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout",
    [
        'credentials.NewStaticCredentialsProvider("{k}", "{s}", "")',  # Go
        'let creds = Credentials::new("{k}", "{s}", None, None, "static");',  # Rust
        "Run `aws configure` and enter {k} then {s} when asked.",
        "Your keys: {k} / {s}",
    ],
)
def test_aws_secret_right_after_its_key_id_without_a_name(layout: str) -> None:
    r = rng(layout)
    key, secret = "AKIA" + drawn(r, 16, string.ascii_uppercase + string.digits), drawn(r, 40, ALNUM + "+/")
    gone(layout.format(k=key, s=secret), key, secret)


HEX = "0123456789abcdef"


@pytest.mark.parametrize(
    ("prefix", "length", "alphabet", "suffix"),
    [
        ("dckr_pat_", 27, ALNUM, ""),  # Docker Hub
        ("shpat_", 32, HEX, ""),  # Shopify
        ("ya29.", 60, ALNUM, ""),  # Google OAuth access token
        ("pscale_tkn_", 43, ALNUM, ""),  # PlanetScale
        ("dp.pt.", 43, ALNUM, ""),  # Doppler
        ("glsa_", 32, ALNUM, "_" + "3fa9c0d1"),  # Grafana service account
    ],
)
def test_vendor_token_prefixes(prefix: str, length: int, alphabet: str, suffix: str) -> None:
    token = prefix + drawn(rng(prefix), length, alphabet) + suffix
    gone(f"echo {token} | docker login -u bot --password-stdin", token)
    gone(f"Paste `{token}` into the CI settings.", token)


def test_a_secret_in_markdown_inline_code() -> None:
    secret = drawn(rng("backtick"), 40, ALNUM + "/+")
    gone(f"Your credentials file has the secret `{secret}` on the wrong profile.", secret)


@pytest.mark.parametrize(
    "code",
    [
        "echo '{p}' | sudo -S systemctl restart nginx",  # piped to sudo
        "sudo -S apt update <<< '{p}'",
        "$mysqli = new mysqli('localhost', 'wp_user', '{p}', 'wordpress');",  # a connect call's third argument
        "$link = mysqli_connect('db.acme.io', 'shop', '{p}', 'shop');",
        "$pdo = new PDO('mysql:host=127.0.0.1;dbname=shop', 'shop', '{p}');",
        'db = pymysql.connect("db-01.internal", "report", "{p}", "sales")',
    ],
)
def test_a_password_piped_to_sudo_or_passed_to_a_connect_call(code: str) -> None:
    password = a_password(rng(code), 11)
    gone(code.format(p=password), password)


@pytest.mark.parametrize(
    "sentence",
    [
        "La password del server di staging è {p}, ricordati di cambiarla.",
        "Пароль от админки: {p}",
        "サーバーのパスワードは {p} です。",
        "数据库密码是 {p}，请妥善保管。",
        "비밀번호는 {p} 입니다.",
        "Hasło do konta serwisowego to {p}.",
        "Yönetici şifresi: {p}",
        "Lösenordet till routern är {p}.",
        "Adgangskoden til wifi er {p}.",
        "Log in as `deploy` with {p} and then run the migration.",
    ],
)
def test_a_password_in_prose_in_more_languages(sentence: str) -> None:
    password = a_password(rng(sentence), 11)
    out = gone(sentence.format(p=password), password)
    assert out.replace("<CREDENTIAL>", "{p}") == sentence


@pytest.mark.parametrize(
    "text",
    [
        'engine = create_engine(f"postgresql://{user}:{password}@{host}/{db}")\n',
        "export DATABASE_URL=postgres://postgres:postgres@localhost:5432/test\n",
        'conn = pika.BlockingConnection(pika.URLParameters("amqp://guest:guest@localhost:5672/"))\n',
        "Your file should start with `-----BEGIN OPENSSH PRIVATE KEY-----` and end with the END line.",
        "It must hold -----BEGIN RSA PRIVATE KEY----- and -----END RSA PRIVATE KEY----- lines.",
        "パスワードは8文字以上にしてください。",
        "Log in as the admin user with the password you set during setup.",
        "sudo -S apt-get update\n",
        "$mysqli = new mysqli($host, $user, $pass, $db);\n",
    ],
)
def test_templates_defaults_and_mentions_stay(text: str) -> None:
    kept(text)


def test_a_key_cut_before_its_footer_takes_its_lines_not_the_prose_after() -> None:
    body = "\n".join(drawn(rng(f"pem{i}"), 64, ALNUM + "+/") for i in range(4))
    text = f"Mine begins like this:\n-----BEGIN RSA PRIVATE KEY-----\n{body}\n\nWhat is wrong with it?"
    out = gone(text, body.split("\n")[1])
    assert out.endswith("\n\nWhat is wrong with it?")


# --- personal data -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("Teléfono de contacto: 612 34 78 90", "612 34 78 90"),
        ("Mój telefon: 512 345 678", "512 345 678"),
        ("Tel.: 601 123 456", "601 123 456"),
    ],
)
def test_a_nine_digit_national_phone_number_after_its_label(text: str, number: str) -> None:
    gone(text, number)


@pytest.mark.parametrize(
    "text",
    [
        "Our call center handled 123 456 789 calls last year.",
        "The population grew to 512 345 678 people by 2020.",
        "np.random.seed(20240229)\nrng = np.random.default_rng(1234567890)\n",
        "import math\nsin = math.sin(0.5)\nprint(sin, 0.479425538604203)\n",
    ],
)
def test_counts_seeds_and_decimals_are_no_phone_numbers(text: str) -> None:
    kept(text)
    if "import" in text or "np." in text:
        ast.parse(redact_text(text)[0])


def test_an_ssn_under_its_csv_column() -> None:
    out = gone("name,ssn,dept\nGrace Liu,403829176,finance\n", "403829176")
    assert out == "name,ssn,dept\nGrace Liu,<US_SSN>,finance\n"
    gone("name\tSSN\nOmar Haddad\t219-09-9999\n", "219-09-9999")


@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("My National Insurance number is JK 48 29 17 B.", "JK 48 29 17 B"),
        ("NI: AB 12 34 56 C", "AB 12 34 56 C"),
        ("Steuer-ID: 47 036 892 815", "47 036 892 815"),
        ("Aadhaar number: 4917 2386 5104", "4917 2386 5104"),
        ("DNI: 48291736K", "48291736K"),
        ("SIN: 046 454 286", "046 454 286"),
        ('{"PESEL": "44051401359"}', "44051401359"),
        ("My passport number is X4829173 if the form asks.", "X4829173"),
    ],
)
def test_a_national_id_after_its_label(text: str, number: str) -> None:
    out = gone(text, number)
    assert "<NATIONAL_ID>" in out or "<PHONE_NUMBER>" in out or "<US_SSN>" in out


@pytest.mark.parametrize(
    ("text", "street"),
    [
        ("Ship it to 1842 Maple Ridge Dr, Apt 3B, Boulder, CO 80304.", "1842 Maple Ridge Dr"),
        ("Address: 27 Wellington Road, Leeds LS12 1DR", "27 Wellington Road"),
        ("Anschrift: Lindenstraße 14, 10969 Berlin", "Lindenstraße 14"),
        ('{"shipping": {"street": "455 Kearny St", "city": "San Francisco"}}', "455 Kearny St"),
        ("Adresse : 12 rue des Lilas, 75019 Paris", "12 rue des Lilas"),
        ("Dirección: Calle Mayor 23, 28013 Madrid", "Calle Mayor 23"),
    ],
)
def test_a_street_address_where_an_address_stands(text: str, street: str) -> None:
    assert "<STREET_ADDRESS>" in gone(text, street)


@pytest.mark.parametrize(
    "text",
    [
        "Sherlock Holmes lived at Baker Street, and Watson visited often.",
        "Wall Street rallied 3.2% after the announcement.",
        "I grew up on 12 Elm Street but moved away years ago.",
        "Our 3 Main Street stores reopened in March 2021 and 2022 Sales rose.",
        "Registered Address: 123 XX Road, Pudong New District, Shanghai",
        "The DNI format is 8 digits and a letter.",
        "sin = 0.8414709848\n",
        'ROW = "AB 12 34"\n',
    ],
)
def test_street_names_and_id_descriptions_stay(text: str) -> None:
    kept(text)
