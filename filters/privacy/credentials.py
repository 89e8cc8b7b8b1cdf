"""Credentials detect-secrets 1.5 misses: :data:`RULES` (``secret_formats.AssignedSecretDetector``
runs them as a detect-secrets plugin) and :func:`credible`, the check every credential finding
passes (detect-secrets' keyword plugin's too): what is too short, a placeholder, a path, a name or
code is not a secret.

Each rule because a planted value went through to a stored row, or a clean value was redacted:

- A value assigned to a secret's name, quoted or not (``API_KEY=...`` in a .env, ``db_password:
  ...`` in YAML, ``"pass": "..."`` in JSON, ``<password>...</password>``, ``define('DB_PASSWORD',
  '...')``, ``<add key="ApiKey" value="..."/>``, Spring's ``<property name="password" value="..."/>``
  and ``<property name="hibernate.connection.password">...</property>``). detect-secrets' keyword
  plugin reads a line as the file type its name says and, for the Python we tell it, wants quotes.
- "the password is ...", "the secret (access) key is ...", the ``aws configure`` prompt
  (``AWS Secret Access Key [None]: ...``), ``Authorization: Basic|Token|ApiKey ...``, ``Bearer``,
  a session cookie (also curl's ``-b``/``--cookie``), an Azure SAS ``sig=``, a URL's password
  (also with an empty user, ``redis://:PASSWORD@host``), a Go DSN ``user:PASSWORD@tcp(host)``, a
  .pgpass line.
- Command lines: curl's ``-u user:PASSWORD`` (httpie's ``-a``), .netrc's ``login NAME password
  PASSWORD``, ``--password X``, ``--api-key X``, ``docker|az login ... -p X``, ``mysql ... -pX``,
  ``sshpass -p X``, ``net use ... /user:U X``, ``htpasswd -b FILE USER X``, PowerShell's
  ``ConvertTo-SecureString "X"``, SQL's ``IDENTIFIED BY 'X'``, Samba's ``-U 'DOM\\user%X'``,
  Oracle's ``sqlplus user/X@db``; a password passed to a login-like call (``client.login("admin",
  "...")``, ``auth=("u", "...")``).
- Code: a secret handed to a setter (``setApiKey("X")``, ``.bearer_auth("X")``), an option's default
  (``add_argument("--app-password", default="X")``), a value wrapped as bytes (``b"X"``,
  ``[]byte("X")``), JSON escaped in a string (``\\"password\\":\\"X\\"``), a key-like query parameter
  (``&appid=X``), docker's ``"auth": "X"``, a key as a URL's user (a Sentry DSN).
- Only the value is replaced (:func:`_value_span`): a query value ends at the next ``&``, a URL's
  password at the ``@`` of the host (the last one: a password may hold ``@``).

What keeps code intact (:func:`credible`): the name must end at the keyword or go on with ``_``/
``-`` and more of a name (``tokenizer``, ``tokens``, ``bypass`` are not secrets), and a name that
ends in what describes a secret rather than holds it (``private_key_path``, ``secret_id``,
``password_min_length``, ``API_KEY_HEADER``) holds none. The value must be 6+ characters, not
a placeholder (``changeme``, ``<your-token>``, ``xxxxxx``, ``...EXAMPLE``), a variable
(``$DB_PASSWORD``, ``${X}``), a call or attribute (``getpass.getpass()``, ``form.password.data``),
a URL or a lower-case path or file name (``certs/server.key``; an AWS key that opens with ``/`` is
mixed-case), nor a call cut at its string's prefix (``sha256(b'abc')``). A password may be
letters or digits only where it is written as data (quoted, after ``:``, or a .env line), not as
``password = variable`` in code; any other secret needs 8+ characters with a letter and a digit.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

__all__ = [
    "RULES",
    "credible",
    "csv_secrets",
    "default_login",
    "name_before",
    "not_a_secret",
    "placeholder",
    "spans",
]

_PASSWORD = r"passw(?:or)?d|passwort|passphrase|passcode|pwd|(?<![A-Za-z0-9])pass(?![A-Za-z0-9])"
_KEYWORDS = (
    _PASSWORD + r"|api[_-]?key|apikey|secret|token|access[_-]?key|auth[_-]?key|private[_-]?key"
    r"|(?:encryption|signing|app|master|client|session|jwt|hmac)[_-]?key|credentials?"
)
# a secret's name: what ends at the keyword or goes on with _/- and more of a name
_NAME = r"(?<![A-Za-z0-9])(?P<name>[A-Za-z0-9_.-]*?(?:" + _KEYWORDS + r")(?:[_-][A-Za-z0-9_-]*)?)"
# JSON inside a string escapes its quotes (\"password\":\"X\"); a value may be wrapped as bytes
# (b"X", []byte("X"), Buffer.from("X"))
_WRAP = r"(?:[bBrR]{1,2}(?=[\"'])|\[\]byte\(|bytes\(|Buffer\.from\()?"
_ASSIGN = r"\\?[\"']?\s*(?P<sep>:=|=>|=(?!=)|:(?!:))\s*" + _WRAP + r"(?P<q>\\?[\"']?)"
# up to a delimiter, however far (a DER key or a session token in a .env line runs past 1,000
# characters: a bound left its tail); credible() decides
_RAW = r"(?P<value>[^\s\"'`,;<>]+)"
_QUOTED = r"(?P<value>[^\s\"'`]+)"
# a type where a value would be: `password: string)`, `password: String?`, `api_key: &str` (code)
_TYPE = re.compile(
    r"&?(?:str|string|String|int|Int|integer|Integer|bool|Bool|boolean|Boolean|number|Number|any|Any|"
    r"bytes|Bytes|char|Char|object|Object|Optional|Option|CharSequence|ByteArray|Text|unknown|void|None|"
    r"(?:Secret|Password|Token|Credentials?|Key)(?:[A-Z]\w*)?)(?:<[^>]*>|\[[^\]]*\])?\??[)\]:,;={]*"
)

RULES = tuple(
    re.compile(rule, re.IGNORECASE | re.MULTILINE)
    for rule in (
        _NAME + _ASSIGN + _RAW,
        # a typed declaration: const API_KEY: &str = "X"; API_KEY: str = "X"; password: str = "X")
        _NAME + r"\s*:\s*[&\w<>\[\]?.| ]{1,40}?\s*=\s*" + _WRAP + r"(?P<q>[\"'])" + _QUOTED,
        # a fallback after the environment: process.env.JWT_SECRET || 'X', os.environ.get("X") or "X"
        _NAME + r"[\"']?\s*[)\]]?\s*(?:\|\||\?\?|\?:|\bor\b)\s*(?P<q>[\"'])" + _QUOTED,
        # a header named as a key or token: Ocp-Apim-Subscription-Key: X, X-Auth-Token: X
        r"(?<![\w-])(?P<name>[A-Za-z][\w-]*-(?:key|token|secret))[\"']?\s*:\s*(?P<q>[\"']?)"
        r"(?P<value>[A-Za-z0-9+/=_.~-]{16,})",
        # WordPress keys and salts, which hold spaces and any symbol: define('NONCE_SALT', 'X')
        r"\bdefine\(\s*[\"'](?P<name>\w*_(?:KEY|SALT)|NONCE_\w+)[\"']\s*,\s*(?P<salt>')(?P<value>[^\n]{8,}?)'\s*\)",
        r"(?<![\w-])(?P<name>_auth)\s*=\s*(?P<value>[A-Za-z0-9+/]{12,}={0,2})(?![\w+/=])",  # npm's legacy _auth
        # a random key as an SDK client's only argument: cohere.Client("X"), Anthropic("X")
        r"(?-i:\b(?:[A-Z]\w*)?(?:Client|API|Api))\(\s*(?P<q>[\"'])"
        r"(?P<value>(?-i:(?=[\w-]*[a-z])(?=[\w-]*[A-Z])(?=[\w-]*\d))[\w-]{30,})[\"']\s*\)",
        # XML: <password>X</password>; .NET's <add key="DbPassword" value="X" />
        r"<(?P<name>[\w:.-]*(?:" + _KEYWORDS + r")[\w:.-]*)>\s*" + _RAW + r"\s*</",
        # Spring's <property name="password" value="X"/>; <property name="...password">X</property>
        r"\b(?:key|name)\s*=\s*[\"']" + _NAME + r"[\"']\s+value\s*=\s*[\"']" + _QUOTED + r"[\"']",
        r"<(?:property|prop|entry|param|setting|add)\b[^<>]*?\b(?:name|key)\s*=\s*[\"']"
        + _NAME
        + r"[\"'][^<>]*?(?<!/)>\s*"
        + _RAW
        + r"\s*</",
        # a name string then its value: define('DB_PASSWORD', 'X'), setenv("API_TOKEN", "X"); in code,
        # where ("password", "username") is a tuple of names: (?P<code>)
        r"(?P<code>)[\"']" + _NAME + r"[\"']\s*,\s*[\"']" + _QUOTED + r"[\"']",
        # a bare "key" holding a long random value ({"key": "6d97c8d4..."}): see credible()
        r"(?<![\w.-])(?P<name>key)[\"']?\s*(?P<sep>[:=])\s*(?P<q>[\"']?)" + _RAW,
        # prose: "the password is X", "mot de passe : X", "AWS Secret Access Key [None]: X"
        r"(?<![A-Za-z])(?P<name>pass(?:word|phrase|code)|passwort|mot de passe|contraseña|senha|wachtwoord|"
        r"пароль|密码)(?:\s+(?:is|was|lautet|est|es|é)\s*(?P<sep>[:：]?)|\s*[:：=])\s*(?P<q>[\"']?)" + _RAW,
        r"\b(?P<name>secret)\b(?:\s+(?:access\s+)?key)?(?:\s*\[[^\]\n]*\])?\s*(?:is\s+|was\s+)?"
        r"[:=]?\s*[\"'`]?" + _RAW,  # (`X`: Markdown's inline code)
        # headers
        # Authorization: X, "Authorization": "X", .header("Authorization", "SSWS X") (Okta)
        r"\b(?P<name>authorization)[\"']?\s*[:=,]\s*[\"']?(?:(?:basic|token|apikey|api-key|bearer|"
        r"digest|key|sso-key|ssws)\s+)?" + _RAW,
        r"\b(?P<name>bearer)\s+" + _RAW,
        # a session cookie: Cookie: sessionid=X; curl -b 'sessionid=X; ...', --cookie "auth_token=X"
        r"(?:\bcookie\s*:[^\n]*?|(?:^|\s)(?:(?-i:-b)|--cookie)[\s=]+[\"']?(?:[^\s\"';]+;\s*)*)"
        r"\b(?P<name>[\w.-]*(?:sess|sid|token|auth|jwt|remember)[\w.-]*)="
        r"(?P<value>[^;\s\"']{16,})",
        r"[?&](?P<name>sig)=(?P<value>[A-Za-z0-9%+/=]{20,})",  # Azure SAS signature
        # URLs: scheme://user:PASSWORD@host (detect-secrets' rule takes none with !, $, & ...),
        # an empty user too; Go's user:PASSWORD@tcp(host:3306)/db
        # a password with @ in it runs to the last @ before the host (amqp://u:P@ss#1@rabbit:5672)
        r"(?P<url>)\b[a-z][a-z0-9+.-]*://[^\s:/\"'`]*:(?P<value>[^\s/\"'`]{3,})@"
        r"(?=[A-Za-z0-9\[{$%<][^\s@/\"'`]*(?:[/\s\"'`?#]|$))",
        r"(?P<url>)\b[\w.-]+:(?P<value>[^\s/\"'`:]{3,})@(?:tcp|unix|udp)\(",
        # a key as a URL's user (a Sentry DSN: https://KEY@o450123.ingest.sentry.io/1)
        # (24+ hex digits, or 20+ characters mixing cases and digits: a user's name is neither)
        r"\b[a-z][a-z0-9+.-]*://(?P<value>[0-9a-f]{24,}|(?=[\w-]*\d)(?=[\w-]*[A-Z])(?=[\w-]*[a-z])[\w-]{20,})@",
        # .pgpass: host:port:database:user:password
        r"^\s*[\w.*-]+:(?:\d+|\*):[\w.*-]+:[\w.*@-]+:(?P<value>[^\s:][^\s]*)\s*$",
        # command lines: curl -u user:X, .netrc login NAME password X, --password X,
        # docker login ... -p X, mysql ... -pX, sshpass -p X
        r"(?:^|\s)(?:-u|--user|--auth)[\s=][\"']?[^\s:\"']+:" + _RAW,
        r"(?:^|\s)(?:https?|xh)(?=\s)[^\n|;&]*?\s(?-i:-a)[\s=][\"']?[^\s:\"']+:" + _RAW,  # httpie's -a user:X
        r"\blogin\s+\S+\s+(?P<name>password)\s+" + _RAW,
        r"(?:^|\s)--" + _NAME + r"[\s=](?P<q>[\"']?)" + _RAW,  # --password X, --api-key X
        r"\b(?:docker|podman|buildah|nerdctl|helm|skopeo|az)\b[^\n|;&]*?\blogin\b[^\n|;&]*?\s-p\s+"
        r"(?P<q>[\"']?)" + _RAW,
        r"\b(?:mysql|mysqldump|mysqladmin|mariadb)\b[^\n|;&]*?\s-p(?P<q>[\"']?)" + _RAW,
        r"\bsshpass\s+-p\s*(?P<q>[\"']?)" + _RAW,
        # sudo's -S reads the password from stdin: echo X | sudo -S ..., sudo -S cmd <<< 'X'
        r"\becho\s+(?P<q>[\"']?)" + _RAW + r"[\"']?\s*\|\s*sudo\s+-\w*S",
        r"\bsudo\s+-\w*S\b[^\n|;&]*?<<<\s*(?P<q>[\"']?)" + _RAW,
        # redis-cli -a X, ldapsearch -w X, sqlcmd -P X, mongosh -p X: each tool's own flag (redis-cli's
        # and ldapsearch's -p is a port, and a match that stopped there missed the -a after it)
        r"(?:\bredis-cli\b[^\n|;&]*?\s(?-i:-a)|\bldap(?:search|add|modify|delete|passwd|whoami)\b[^\n|;&]*?\s"
        r"(?-i:-w)|\b(?:sqlcmd|bcp)\b[^\n|;&]*?\s(?-i:-P)|\bmongo(?:sh|dump|restore|export|import)?\b"
        r"[^\n|;&]*?\s(?-i:-p))\s+(?P<q>[\"']?)" + _RAW,
        # Samba's -U 'DOMAIN\user%X' (smbclient, rpcclient, net ...); Oracle's user/X@db (sqlplus ...)
        r"\b(?:smbclient|rpcclient|smbcacls|smbget|smbmap|smbtree|net)\b[^\n|;&]*?\s(?:-U|--user(?:name)?)[\s=]"
        r"[\"']?[^\s%\"']+%" + _RAW,
        r"\b(?:sqlplus|sqlldr|expdp|impdp|rman|dgmgrl)\b(?:\s+(?:-\w+|target|catalog|auxiliary))*\s+(?:\w+=)?"
        r"[\"']?[\w$#.]+/(?P<value>[^\s@/\"']+)(?=[@\s\"']|$)",
        # openssl's -passin pass:X, keytool's -storepass X / -keypass X
        r"(?:^|\s)-(?P<name>(?:store|key|src|dest|srcstore|deststore)?pass(?:in|out|word)?)\s+(?:pass:)?"
        r"(?!(?:env|file|fd):|stdin\b)(?P<q>[\"']?)" + _RAW,  # (env:VAR, file:PATH name where it is)
        # a secret set by name: aws configure set aws_secret_access_key X, npm config set _authToken X,
        # setx API_KEY "X"
        r"\b(?:configure\s+set|config\s+set|setx)\s+[\"']?" + _NAME + r"[\"']?\s+(?P<q>[\"']?)" + _RAW,
        # a password as a login-like call's second argument: client.login("admin", "X")
        r"\b(?P<name>login|log_in|signin|sign_in|authenticate|auth|basic_?auth|HTTPBasicAuth|"
        r"HTTPDigestAuth|BasicAuth|\w*Credentials?|PasswordAuthentication)\s*(?:=\s*)?\(\s*[\"'][^\"'\n]{1,64}[\"']\s*,\s*(?P<q>[\"'])"
        + _QUOTED,
        # a secret handed to a setter or a builder: client.setApiKey("X"), .bearer_auth("X"), .token("X")
        r"(?<![\w])(?P<name>(?:set_?|with_?|use_?)?(?:" + _KEYWORDS + r"|bearer(?:_?auth)?))\s*\(\s*"
        r"(?P<q>[\"'])" + _QUOTED,
        # an option named as a secret with its default: add_argument("--app-password", default="X")
        r"[\"']-{0,2}" + _NAME + r"[\"'][^\n)]{0,80}?\bdefault\s*=\s*(?P<q>[\"'])" + _QUOTED,
        # a key-like query parameter: ?appid=X, &api_key=X, &access_token=X
        r"[?&](?P<name>appid|app_id|apikey|api_key|key|token|access_token|auth|secret|signature|"
        r"client_secret)=(?P<value>[^&#\s\"'`<>]{8,})",
        r"[\"'](?P<name>auth)[\"']\s*:\s*(?P<q>[\"'])(?P<value>[A-Za-z0-9+/]{16,}={0,2})[\"']",  # docker config
        # SQL: IDENTIFIED BY 'X' (MySQL), WITH PASSWORD 'X' (PostgreSQL)
        r"\b(?:IDENTIFIED(?:\s+WITH\s+\w+)?\s+BY|WITH\s+(?:ENCRYPTED\s+)?PASSWORD)\s+(?P<q>['\"])" + _QUOTED,
        r"\bConvertTo-SecureString\s+(?:-String\s+)?(?P<q>[\"'])" + _QUOTED,  # PowerShell
        r"\bnet\s+use\b[^\n]*?/user:\S+\s+" + _RAW,  # Windows: net use Z: \\srv\share /user:DOM\u X
        r"\bhtpasswd\s+(?:-\w+\s+)*-\w*b\w*\s+(?:-\w+\s+)*\S+\s+\S+\s+" + _RAW,  # htpasswd -b FILE USER X
        # a passphrase of words; a wallet's seed phrase
        r"\b(?P<name>passphrase)[\"']?\s*[:=]\s*[\"']?(?P<value>[A-Za-z]+(?: [A-Za-z]+){2,11})[\"']?\s*$",
        r"\b(?P<name>(?:seed|recovery|mnemonic)(?:[ _-]?(?:phrase|words))?)\s*[:=]\s*"
        r"(?P<value>[a-z]+(?: [a-z]+){11,23})\b",
    )
)

# what a name that holds no secret ends in: it names, locates, sizes or describes one
_DESCRIBES = frozenset(  # 50 words read better as words than as a list of strings
    "path file filename files dir folder template id ids name names algorithm algo alg length len "  # noqa: SIM905
    "min max days hours ttl expiry expires expiration header field type url uri endpoint policy mode "
    "env var lambda arn count size format prefix label hint rotation version location store timeout seconds "
    "secs minutes mins ms attempts retries tries limit interval lifetime age delay duration window regex".split()
)
_PLACEHOLDER = re.compile(
    r"(?i)^(?:x+|\*+|\.+|-+|#+|0+|<.*>|\{\{.*\}\}|\$\{.*\}|%\(.*\)s?|\[.*\]|(?:change|replace)[_-]?me\w*"
    r"|your[_-]?\w*|my[_-]?(?:password|secret|token|key)\w*|example\w*|sample\w*|dummy\w*|placeholder\w*"
    r"|redacted|hidden|masked|none|null|nil|undefined|true|false|yes|no|required|optional|empty|string|"
    r"str|bytes|number|integer|int|boolean|bool|secret|secrets|password|passwords|passwort|passphrase|"
    r"(?:test|fake|dummy|mock)[_-][\w-]*|token|tokens|test|tests|testing|todo|tbd|fixme|foo|bar|foobar|default|value|n/a|na|unset|"
    r"prompt|ask|stdin|env|environ)$"
)
_VARIABLE = re.compile(r"\$\w+|%\w+%")
_SAME_RUN = re.compile(r"(.)\1{5,}")
_FILE = re.compile(
    r"(?i)^[\w./~-]*\.(?:key|pem|crt|cer|der|p12|pfx|jks|json|ya?ml|toml|ini|cfg|conf|env|txt|html?|"
    r"xml|csv|py|js|ts|sh|gpg|asc|pub|ppk|kdbx|db|sqlite|log|tpl|j2|md)$"
)
_PATH = re.compile(r"^(?:~|\.{1,2})?/?(?:[a-z0-9_.-]+/)+[a-z0-9_.-]*$")  # lower-case segments
_ATTRIBUTES = re.compile(r"^[A-Za-z_]\w{0,24}(?:\.[A-Za-z_]\w{0,24})+(?:\(.*)?$")
_PREFIXED = re.compile(r"(?i)\((?:[bruf]|[br]{2}|[fr]{2})$")  # a string's prefix: b"", rb"", f"", u""
_HEX = re.compile(r"^[0-9a-fA-F]{24,}$")
_B64 = re.compile(r"^[A-Za-z0-9+/=_-]{20,}$")


def placeholder(value: str) -> bool:
    """What stands where a value would be, in code or in prose (credible() and prose.py's
    looks_like_password() both ask): a placeholder (``changeme``, ``<NEW_PASSWORD_1>``,
    ``${DB_PASSWORD_V2}``), a variable (``$DB_PASSWORD``, ``%DB_PASSWORD%``), a documentation value."""
    return bool(_PLACEHOLDER.match(value) or _VARIABLE.fullmatch(value)) or not_a_secret(value)


def not_a_secret(value: str) -> bool:
    """Placeholders and documentation values, whatever finds them (an API key's rule too)."""
    if re.fullmatch(r"[A-Z]+(?:_[A-Z]+)*", value) and re.search(r"PASS|PWD|SECRET|TOKEN|KEY", value):
        return True  # an all-caps name standing for one (postgresql://USER:PASSWORD@HOST)
    if re.fullmatch(r"\{[A-Za-z_][\w.]*\}", value):  # a template's field: f"{user}:{password}@{host}"
        return True
    return bool(_SAME_RUN.search(value)) or "example" in value.lower()


def default_login(line: str, start: int, end: int) -> bool:
    """A URL's password that repeats its user (``postgres://postgres:postgres@localhost``,
    ``amqp://guest:guest@rabbit``): a service's documented default, nobody's secret; a template's
    ``user:password`` (``postgres://user:password@localhost/db`` in a .env.example) neither."""
    value = line[start:end]
    user = re.search(r"//([^/:@\s]*):$", line[max(0, start - 40) : start])
    named = user and (
        user.group(1).lower() in ("user", "username", "login", "usr") or placeholder(user.group(1))
    )
    return line[max(0, start - len(value) - 3) : start] == f"//{value}:" or bool(named and placeholder(value))


def credible(
    value: str, name: str = "", *, as_data: bool = True, shortest: int = 6, literal: bool = False
) -> bool:
    """Whether ``value``, written under the secret's name ``name``, can be a secret: see the module's
    notes. ``as_data``: written as data (quoted, after ``:``, a .env line) rather than a bare
    ``name = value`` in code, where a word is a variable. ``shortest``: a URL's password may be
    shorter (``redis://:abc@host`` is plainly one). ``literal``: quoted or a .env line's value, so
    never a type or an attribute (``"Ab3.cdEf9xQ"`` is a password, ``form.password.data`` code)."""
    value = value.strip()
    if not literal and _TYPE.fullmatch(value):
        return False
    if len(value) < shortest or placeholder(value):
        return False
    if re.fullmatch(r"![a-z_]+", value):  # a YAML tag: `db_password: !vault |`
        return False
    if value[0] in "$%{<([@&*" or "://" in value or _FILE.match(value) or _PATH.match(value):
        return False
    # a call or an index, cut at its quote (`input(`, `os.environ[`), at its string's prefix
    # (`sha256(b'abc')`, `b64encode(f"{user}")`) or whole (`getpass()`): code
    if (not literal and _ATTRIBUTES.match(value)) or value[-1] in "([)" or _PREFIXED.search(value):
        return False
    # a variable named as a secret (raw_password, dbPassword, new_token): code, not its value
    identifier = re.fullmatch(r"[A-Za-z_]\w*", value) and re.search(r"(?i)" + _KEYWORDS, value)
    if identifier and ("_" in value or not any(c.isdigit() for c in value)):
        return False
    if name and not holds_secret(name) and not _HEX.fullmatch(value):  # 24+ hex digits: a key's own
        return False
    if name.lower() == "key":  # a bare "key" is a secret only when its value looks random
        return bool(_HEX.match(value)) or bool(
            _B64.match(value)
            and re.search(r"[a-z]", value)
            and re.search(r"[A-Z]", value)
            and re.search(r"\d", value)
        )
    if " " in value:  # a passphrase or seed phrase of words (their own rules)
        return True
    password = bool(re.search(_PASSWORD + r"|credential|pass(?:in|out)$", name, re.IGNORECASE)) or name.lower() in {
        "login", "log_in", "signin", "sign_in", "authenticate", "auth", "basic_auth", "basicauth",
        "httpbasicauth", "httpdigestauth", "",
    }  # fmt: skip
    letter, digit = any(c.isalpha() for c in value), any(c.isdigit() for c in value)
    if letter and digit and len(value) >= 8:  # the shape of any key or token
        return True
    if not password:
        return False
    # a password may be shorter, or letters or digits only; but `password = word` in code is a
    # variable, and `password: SecretStr` a type
    if re.fullmatch(r"(?:[A-Z][a-z]+){2,}", value):
        return False
    return as_data or not re.fullmatch(r"[A-Za-z_]\w*", value)


def holds_secret(name: str) -> bool:
    """A name that ends in what describes a secret (``private_key_path``, ``secret_id``,
    ``password_min_length``) names one but does not hold it."""
    return re.split(r"[^a-z0-9]+", name.lower().strip())[-1] not in _DESCRIBES


_NAME_BEFORE = re.compile(r"([A-Za-z0-9_.-]+)[\"']?\s*(?::=|=>|=|:)\s*[\"']?$")


def name_before(line: str, start: int) -> str:
    """The name a value at ``start`` is assigned to (``db_password`` of ``db_password = "..."``), or ''."""
    m = _NAME_BEFORE.search(line[max(0, start - 80) : start])
    return m.group(1) if m else ""


def spans(line: str) -> Iterator[tuple[int, int]]:
    """Where the credible values of ``line`` stand (each rule's ``value`` group)."""
    for rule in RULES:
        for m in rule.finditer(line):
            groups = m.groupdict()
            name = groups.get("name") or ""
            # written as data: quoted, after ":", or a .env line; `password = word` in code is a variable
            as_data = bool(groups.get("q")) or groups.get("sep") in (None, ":", "：", "=>")
            as_data = as_data and groups.get("code") is None
            env_line = bool(re.match(r"\s*(?:export\s+)?[A-Za-z0-9_.-]+=\S", line))
            as_data = as_data or env_line
            if groups.get("sep") == "=" and not groups.get("q") and re.search(r"\s=", m.group(0)):
                as_data = False
            shortest = 3 if groups.get("url") is not None else 6  # (?P<url>): a URL's password
            start, end = _value_span(line, m)
            if groups.get("salt") is not None:  # a WordPress salt: any characters but plain words
                if not re.fullmatch(r"[A-Za-z ]+", line[start:end]) and not not_a_secret(line[start:end]):
                    yield start, end
            elif credible(line[start:end], name, as_data=as_data, shortest=shortest,
                          literal=bool(groups.get("q")) or env_line):  # fmt: skip
                yield start, end


def _value_span(line: str, m: re.Match[str]) -> tuple[int, int]:
    """The value of a rule's match, less what follows it in its own syntax: in a query string the
    next ``&parameter`` (``?pass=X&remember=1``), in a URL's user part the ``@host``
    (``https://x-access-token:X@github.com``)."""
    start, end = m.span("value")
    name_at = m.start("name") if m.groupdict().get("name") is not None else m.start()
    if line[name_at - 1 : name_at] in ("?", "&", "#"):
        end = start + len(re.split(r"[&#]", line[start:end])[0])
    elif re.search(r"://[^\s/@]*$", line[:name_at]) and "@" in line[start:end]:
        end = line.index("@", start, end)
    # JSON inside a string or a notebook's source lines: an escape (the value's closing \", a \n)
    # ends the value
    end = start + len(re.sub(r"(?:\\[nrt])+$|\\$", "", line[start:end]))
    # brackets the value closes but never opened: (refresh_token=X), {"password": var})
    while end > start and line[end - 1] in ")]}" and "([{"[")]}".index(line[end - 1])] not in line[start:end]:
        end -= 1
    return start, end


_HEADER = re.compile(r"[A-Za-z][A-Za-z0-9 _-]{0,39}")


def _secret_column(header: str) -> bool:
    name = header.strip().replace(" ", "_")
    return bool(re.fullmatch(_NAME, name, re.IGNORECASE)) and holds_secret(name)


def csv_secrets(text: str) -> Iterator[tuple[int, int]]:
    """The secret column of a CSV with a header (an AWS console's ``Access key ID,Secret access
    key``, a password export): each following row's field under a secret's name."""
    offset, columns = 0, None
    for line in text.splitlines(keepends=True):
        fields = line.rstrip("\r\n").split(",")
        if len(fields) >= 2 and all(_HEADER.fullmatch(f.strip()) for f in fields):
            secret = [i for i, f in enumerate(fields) if _secret_column(f)]
            columns = (len(fields), secret) if secret else None
            offset += len(line)
            continue
        if columns and len(fields) == columns[0]:
            at = offset
            for i, field in enumerate(fields):
                if i in columns[1] and credible(field, "password"):
                    yield at, at + len(field)
                at += len(field) + 1
        elif columns:
            columns = None
        offset += len(line)
