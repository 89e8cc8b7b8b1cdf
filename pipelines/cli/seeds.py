"""``ptf seeds``: make seed files (``ptf seeds procedural``: reasoning-gym tasks with their scorers)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from ptfactory.errors import UserInputError
from ptfactory.pipelines.cli._app import app, err, user_path

seeds_app = typer.Typer(
    help="Make seed files: procedural tasks that carry their own checks.", no_args_is_help=True
)
app.add_typer(seeds_app, name="seeds")


@seeds_app.command("procedural")
def seeds_procedural(
    name: Annotated[
        str,
        typer.Argument(
            metavar="NAME",
            help="reasoning-gym families, comma-separated (e.g. basic_arithmetic,chain_sum); "
            "an unknown name lists the available ones",
        ),
    ],
    out: Annotated[
        Path, typer.Option("--out", metavar="F.jsonl", help="the seed file to write (atomically)")
    ],
    count: Annotated[int, typer.Option("--count", min=1, max=100_000, help="tasks drawn per family")] = 20,
    seed: Annotated[
        int, typer.Option("--seed", min=0, help="the draw's seed: the same seed, the same tasks")
    ] = 0,
    force: Annotated[bool, typer.Option("--force", help="replace F.jsonl if it exists")] = False,
) -> None:
    """Draw COUNT tasks of each family NAME from reasoning-gym into a JSONL seed file.

    Each row: `id` (<family>-<seed>-<index>), `instruction` (the question, asking for the answer
    between <answer> tags), `answer` (the generator's, where the family has a single one) and
    `metadata` (the generator's, intact: the family's scorer reads it). Feed the file to `ptf run
    --seeds`, or name the families in factory.yaml's `seeds.procedural`. Families built from benchmark
    test items (gsm_symbolic, arc_agi, aiw) are refused.

    Example: `ptf seeds procedural basic_arithmetic,chain_sum --count 50 --out seeds/procedural.jsonl`
    """
    from ptfactory.filters.verify.procedural import family_problem
    from ptfactory.generators.procedural import draw_seed_rows, write_seed_file

    families = [part.strip() for part in name.split(",") if part.strip()]
    if not families:
        raise UserInputError("NAME names no family; pass e.g. basic_arithmetic")
    for family in families:
        if problem := family_problem(family):
            raise UserInputError(problem)
    path = user_path(out)
    if path.is_dir():
        raise UserInputError(f"--out {path} is a folder; name a .jsonl file")
    if path.suffix != ".jsonl":
        raise UserInputError(f"--out {path}: seed files written here are JSONL; name a .jsonl file")
    if path.exists() and not force:
        raise UserInputError(f"{path} exists; pass --force to replace it")
    rows = draw_seed_rows(families, count, seed)
    write_seed_file(rows, path)
    per = {f: sum(1 for r in rows if r["id"].startswith(f"{f}-{seed}-")) for f in families}
    short = [f"{f} {n}" for f, n in per.items() if n < count]
    note = f" (fewer distinct questions: {', '.join(short)})" if short else ""
    err.print(f"{len(rows)} tasks from {len(families)} families{note}", highlight=False, soft_wrap=True)
    typer.echo(str(path))
