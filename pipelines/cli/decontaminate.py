"""``ptf decontaminate``: a table file, or a published version, against the benchmark index."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Any

import typer

from ptfactory.errors import UserInputError
from ptfactory.pipelines.cli._app import JsonOpt, app, err, out, print_json, user_path


def _cache_dir() -> Path:
    """The project's state dir inside a project, else the user's cache (no .ptf left in a random folder)."""
    from ptfactory.home import find_project, local_state_dir

    if find_project() is not None or os.environ.get("PTF_HOME"):
        return local_state_dir()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "ptfactory"


def _config(benchmarks: list[str] | None, ngram: int) -> Any:
    """``--benchmarks`` values: built-in names, or ``PATH:FIELD[,FIELD...]`` for a file of your own."""
    from pydantic import ValidationError

    from ptfactory.filters.decontamination import BUILTINS, BenchmarkFile, DecontaminationConfig

    builtins: list[str] = []
    files: list[BenchmarkFile] = []
    for value in [v.strip() for given in benchmarks or [] for v in given.split(";") if v.strip()]:
        if value in BUILTINS:
            builtins.append(value)
            continue
        path, _, fields = value.rpartition(":")
        if not path or not fields:
            raise UserInputError(
                f"--benchmarks {value!r}: give a built-in name ({', '.join(BUILTINS)}) or PATH:FIELD[,FIELD...]"
            )
        source = user_path(Path(path))
        name = "".join(c if c.isalnum() or c in "_.-" else "-" for c in source.stem) or "file"
        files.append(BenchmarkFile(path=source, fields=[f for f in fields.split(",") if f], name=name))
    if not builtins and not files:
        builtins = list(BUILTINS)  # nothing named: every built-in (naming only files checks only those)
    try:
        return DecontaminationConfig(ngram=ngram, builtins=builtins, benchmarks=files)
    except ValidationError as exc:
        raise UserInputError(f"--benchmarks/--ngram: {exc.errors()[0]['msg']}") from None


@app.command()
def decontaminate(
    source: Annotated[
        str, typer.Argument(metavar="IN|NAME@VERSION", help="a .parquet/.jsonl table, or a published version")
    ],
    out_path: Annotated[
        Path | None,
        typer.Option(
            "--out",
            help="IN: where the clean rows go (.parquet or .jsonl, written atomically); "
            "NAME@VERSION: a file for the colliding sample ids (for `ptf datasets retract --samples`)",
        ),
    ] = None,
    text_column: Annotated[
        list[str] | None,
        typer.Option(
            "--text-column", help="a column to check (repeat for several); default every text column"
        ),
    ] = None,
    benchmarks: Annotated[
        list[str] | None,
        typer.Option(
            "--benchmarks",
            help="built-in names (humaneval, gsm8k-test, aime-2025, gpqa-diamond, writingbench, "
            "agentbench-os) and/or PATH:FIELD[,FIELD] files; repeat for several; default every built-in",
        ),
    ] = None,
    dropped: Annotated[
        Path | None,
        typer.Option("--dropped", help="IN: also write the colliding rows with their evidence here"),
    ] = None,
    ngram: Annotated[int, typer.Option("--ngram", help="words per n-gram", min=5, max=50)] = 13,
    as_json: JsonOpt = False,
) -> None:
    """Drop rows that share an n-gram with an evaluation-set item, naming the item.

    IN (a Parquet or JSONL table): the rows that collide with nothing go to --out; the count and each
    colliding row (row number, benchmark, item, shared n-gram) go to stderr. NAME@VERSION: re-check a
    published version against today's index (a benchmark added later) and list the colliding sample ids,
    ready for `ptf datasets retract NAME@VERSION --samples FILE --reason contaminated`.

    Example: `ptf decontaminate rows.jsonl --out clean.jsonl --text-column prompt`; also
    `ptf decontaminate sft@v3 --out contaminated.txt`
    """
    from ptfactory.filters.decontamination import load_index
    from ptfactory.filters.decontamination.files import SUFFIXES
    from ptfactory.home import project_root

    path = user_path(Path(source))
    is_version = "@" in source and not path.exists()
    if not is_version:
        if out_path is None:
            raise UserInputError(f"--out is required for a table file ({source}): where the clean rows go")
        if not path.is_file() or path.suffix not in SUFFIXES:
            raise UserInputError(
                f"{source}: {'unsupported file type ' + repr(path.suffix) if path.is_file() else 'no such file'}; "
                "give a .parquet or .jsonl table, or a published version as NAME@vN"
            )
    config = _config(benchmarks, ngram)
    index = load_index(config, _cache_dir(), project_root())
    empty = index.empty_benchmarks()
    if empty:
        raise UserInputError(f"benchmark(s) {', '.join(empty)} loaded 0 items: check their path and fields")
    if out_path is None or is_version:
        _version(source, index, out_path, as_json)
    else:
        _file(path, user_path(out_path), index, text_column, dropped, as_json)


def _file(
    path: Path, target: Path, index: Any, columns: list[str] | None, dropped: Path | None, as_json: bool
) -> None:
    from ptfactory.filters.decontamination import decontaminate_file

    result = decontaminate_file(path, target, index, columns, user_path(dropped) if dropped else None)
    if as_json:
        print_json(
            {
                "rows_in": result.rows_in,
                "kept": result.kept,
                "index": index.summary(),
                "contaminated": [{"row": i, **vars(h)} for i, h in result.hits],
            }
        )
        return
    for row, hit in result.hits:
        err.print(
            f'row {row}: {hit.benchmark} {hit.item} ({hit.shared} shared) "{hit.ngram}"', highlight=False
        )
    err.print(
        f"{result.rows_in} rows -> {result.kept} kept, {len(result.hits)} contaminated "
        f"(index {index.content_hash[:12]}, n={index.n})",
        highlight=False,
    )
    typer.echo(str(target))


def _version(ref: str, index: Any, target: Path | None, as_json: bool) -> None:
    from ptfactory.filters.decontamination import recheck_version
    from ptfactory.pipelines.cli._app import datasets

    manifest, hits = recheck_version(datasets(), ref, index)
    if target is not None:
        file = user_path(target)
        file.parent.mkdir(parents=True, exist_ok=True)
        file.write_text("".join(f"{sample}\n" for sample, _ in hits), encoding="utf-8")
    if as_json:
        print_json(
            {
                "version": manifest.ref,
                "rows": manifest.rows,
                "index": index.summary(),
                "contaminated": [{"sample_id": s, **vars(h)} for s, h in hits],
            }
        )
        return
    for sample, hit in hits:
        out.print(f'{sample}  {hit.benchmark}  {hit.item}  "{hit.ngram}"', highlight=False)
    out.print(
        f"{manifest.ref}: {len(hits)} of {manifest.rows} rows collide with the index "
        f"({index.content_hash[:12]}, n={index.n})",
        highlight=False,
    )
    if hits:
        listed = user_path(target) if target is not None else "FILE (write it with --out FILE)"
        out.print(
            f"take them out: ptf datasets retract {manifest.ref} --samples {listed} --reason contaminated",
            highlight=False,
        )
