"""Label Studio accounts for annotators (``ptf annotate adduser``)."""

from __future__ import annotations

import json
import secrets
import subprocess
from typing import TYPE_CHECKING

from ptfactory.errors import AnnotationError

if TYPE_CHECKING:
    from ptfactory.annotators.labelstudio.server import LabelStudioServer

__all__ = ["add_user"]


def add_user(server: LabelStudioServer, email: str, password: str | None = None) -> dict[str, str]:
    """A non-admin account (an annotator) with a password for the browser and an API token.

    Label Studio's API cannot set passwords, so this runs Django in Label Studio's venv
    against its database. Idempotent: an existing account keeps its token.
    """
    known = server.annotators()
    password = password or known.get(email, {}).get("password") or secrets.token_urlsafe(14)
    # the account travels on stdin: a command line is readable by every user of the machine (`ps`)
    run = subprocess.run(
        [str(server.venv / "bin" / "python"), "-c", _ADD_USER],
        input=json.dumps({"email": email, "password": password}),
        capture_output=True,
        text=True,
        env=server.environment(),
        cwd=server.data_dir,
        check=False,
    )
    if run.returncode != 0:
        raise AnnotationError(f"could not create Label Studio user {email}: {run.stderr.strip()[-800:]}")
    token = run.stdout.strip().splitlines()[-1]
    stored = json.loads(server.credentials_file.read_text()) if server.credentials_file.exists() else {}
    stored.setdefault("annotators", {})[email] = {"password": password, "token": token}
    server.store_credentials(stored)
    return {"email": email, "password": password, "token": token}


_ADD_USER = """
import os, pathlib, sys
import label_studio
sys.path.insert(0, str(pathlib.Path(label_studio.__file__).parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "label_studio.core.settings.label_studio")
import django
django.setup()
from organizations.models import Organization
from rest_framework.authtoken.models import Token
from users.models import User
import json
account = json.loads(sys.stdin.read())
email, password = account["email"], account["password"]
user = User.objects.filter(email=email).first()
if user is None:
    user = User.objects.create_user(email=email, password=password, username=email)
elif not user.check_password(password):
    user.set_password(password)
    user.save()
org = Organization.objects.order_by("id").first()
org.add_user(user)
user.active_organization = org
user.save(update_fields=["active_organization"])
token, _ = Token.objects.get_or_create(user=user)
print(token.key)
"""
