"""What a user reads is written for them: no `--help` text, deployment file
or README line cites a SPEC section they do not have (the code's comments
and docstrings cite SPEC; what awc shows says it in words), and the README
lists every field of the report a tick returns (SPEC §6, §7.1, §8)."""

from __future__ import annotations

import re
from dataclasses import fields
from typing import Any

import click
import pytest

from tests.support import ROOT
from tick.cli import cli
from tick.report import TickReport

CITATION = re.compile(r"SPEC|§")


def every_command(command: click.Command, path: tuple[str, ...]) -> Any:
    yield path, command
    if isinstance(command, click.Group):
        for name, sub in sorted(command.commands.items()):
            yield from every_command(sub, (*path, name))


@pytest.mark.parametrize(("path", "command"), list(every_command(cli, ("awc",))),
                         ids=lambda value: " ".join(value) if isinstance(value, tuple) else "")
def test_no_help_text_cites_the_spec(path: tuple[str, ...], command: click.Command) -> None:
    with click.Context(command, info_name=" ".join(path)) as ctx:
        text = command.get_help(ctx)
    assert not CITATION.search(text), text


USER_FILES = sorted(
    str(p.relative_to(ROOT))
    for pattern in ("template.yaml", "Dockerfile", "README.md", "cron/*", "scripts/*",
                    "deploy/**/*.yaml", "examples/**/*.json")
    for p in ROOT.glob(pattern) if p.is_file())


@pytest.mark.parametrize("name", USER_FILES)
def test_no_file_a_user_deploys_or_reads_cites_the_spec(name: str) -> None:
    text = (ROOT / name).read_text(encoding="utf-8")
    cited = [line for line in text.splitlines() if CITATION.search(line)]
    assert cited == []


def test_the_readme_lists_every_field_of_the_report() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("The report (`--json`, and the Lambda's return value):")
    listed = set(re.findall(r"`(\w+)`", readme[start:readme.index("\n\n", start)]))
    assert [f.name for f in fields(TickReport) if f.name not in listed] == []

