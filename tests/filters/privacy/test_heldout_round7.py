"""Held-out round 7: forms a fresh battery of planted secrets and personal data found going through
(or clean texts changed). Values are drawn per case, so a rule that knows one string fails here."""

from __future__ import annotations

import pytest

from tests.filters.privacy.planted import ALNUM, a_password, drawn, gone, kept, rng

URL64 = ALNUM + "-_"


# --- secrets -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout",
    [
        "SUPABASE_SERVICE_ROLE_KEY={t}",
        "export NEXT_PUBLIC_ANON_KEY={t}",
        "const client = createClient(url, '{t}');",
        "token rejected: {t} (expired)",
    ],
)
def test_a_jwt_whose_payload_is_not_json_first(layout: str) -> None:
    r = rng(layout)
    token = f"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.{drawn(r, 90, URL64)}.{drawn(r, 43, URL64)}"
    gone(layout.format(t=token), token)


@pytest.mark.parametrize(
    "layout",
    [
        "I tried `sudo` with {p} but it says incorrect",
        "login: root / pass {p} (staging only!!)",
        "> can u send me the creds\n> sure: deploy / {p}",
        "[10:02] ana: what's the db password?\n[10:03] bo: app / {p}",
    ],
)
def test_a_password_after_sudo_pass_or_in_a_reply_to_a_question(layout: str) -> None:
    p = a_password(rng(layout), 10)
    gone(layout.format(p=p), p)


@pytest.mark.parametrize(
    "text",
    [
        "You pass the callback to the function; sudo with care.",
        "If you pass Python3.12 as the interpreter it works.",
        "> where are the creds?\n> in vault: team/prod-db1",
        "> where are the creds?\n> in 1Password / Bitwarden",
    ],
)
def test_pass_as_a_word_and_paths_stay(text: str) -> None:
    kept(text)


# --- personal data -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "layout",
    ["Passport No. {n} (USA), exp 2031", "passport: {n}", "Passport # {n}"],
)
def test_a_passport_number_after_its_label(layout: str) -> None:
    number = str(rng(layout).randint(100_000_000, 999_999_999))
    gone(layout.format(n=number), number)


@pytest.mark.parametrize(
    "text",
    [
        "Use Google's public DNS 8.8.8.8 and 8.8.4.4, or Cloudflare's 1.1.1.1.",
        "nameserver 9.9.9.9\nnameserver 208.67.222.222",
        "ping6 2606:4700:4700::1111 to test IPv6",
    ],
)
def test_public_dns_resolvers_stay(text: str) -> None:
    kept(text)


def test_a_public_address_beside_a_resolver_still_goes() -> None:
    out = gone("client 185.199.45.12 resolved via 8.8.8.8", "185.199.45.12")
    assert "8.8.8.8" in out


@pytest.mark.parametrize(
    "text",
    [
        "DATABASE_URL=postgres://user:password@localhost:5432/db",
        "mongodb://username:secret@localhost:27017/app",
        "amqp://your_user:your_password@rabbit:5672//",
    ],
)
def test_a_template_url_login_stays(text: str) -> None:
    kept(text)


def test_a_url_password_under_a_template_user_still_goes() -> None:
    p = a_password(rng("template-user"), 10)
    gone(f"postgres://user:{p}@db.internal:5432/app", p)
