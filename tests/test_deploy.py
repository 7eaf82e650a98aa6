"""SPEC §7.1, §8: the deployment files — template.yaml through an offline SAM
transform and cfn-lint, the systemd units through systemd-analyze, the
crontab line, and the Lambda build script."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from tests.support import ROOT, building_the_checkout

CRON = ROOT / "cron"


def transformed(mutate: Any = None) -> dict[str, Any]:
    """template.yaml as `sam package` + the SAM transform would hand it to CloudFormation."""
    from cfnlint.decode import decode_str
    from samtranslator.translator.transform import transform

    template, errors = decode_str((ROOT / "template.yaml").read_text())
    assert not errors, errors
    template = json.loads(json.dumps(template, default=str))
    # `sam package` replaces the local CodeUri with the uploaded artifact.
    template["Resources"]["TickFunction"]["Properties"]["CodeUri"] = "s3://artifacts/awc.zip"
    if mutate is not None:
        mutate(template["Resources"]["TickFunction"]["Properties"])

    class NoManagedPolicies:
        def load(self) -> dict[str, str]:
            return {}

    return dict(transform(template, {}, NoManagedPolicies()))


def lint(template: dict[str, Any]) -> list[str]:
    import cfnlint.api

    return [f"{m.rule.id} {m.message}" for m in
            cfnlint.api.lint(json.dumps(template), regions=["eu-west-1", "us-east-1"])]


@pytest.fixture(autouse=True)
def region(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")


def test_template_transforms_and_passes_cfn_lint() -> None:
    template = transformed()
    assert lint(template) == []
    resources = template["Resources"]
    fn = resources["TickFunction"]["Properties"]
    assert fn["Architectures"] == ["arm64"] and fn["Runtime"].startswith("python3.")
    assert fn["Handler"] == "tick.drivers.aws_lambda.handler"
    schedule = next(r for r in resources.values() if r["Type"] == "AWS::Scheduler::Schedule")
    props = schedule["Properties"]
    assert props["FlexibleTimeWindow"] == {"Mode": "OFF"}
    assert props["Target"]["RetryPolicy"]["MaximumRetryAttempts"] == 0
    assert json.loads(props["Target"]["Input"]) == {
        "scheduled_time": "<aws.scheduler.scheduled-time>",
        "execution_id": "<aws.scheduler.execution-id>"}
    invoke = next(r for r in resources.values() if r["Type"] == "AWS::Lambda::EventInvokeConfig")
    assert invoke["Properties"]["MaximumRetryAttempts"] == 0
    assert "OnFailure" in invoke["Properties"]["DestinationConfig"]
    assert any(r["Type"] == "AWS::Lambda::Alias" for r in resources.values())
    # Alarms on the function's errors and on the failure queue's depth, each
    # notifying the AlarmTopicArn parameter's topic when one is given.
    alarms = {name: r["Properties"] for name, r in resources.items()
              if r["Type"] == "AWS::CloudWatch::Alarm"}
    depth = alarms["FailedInvocationsAlarm"]
    assert (depth["Namespace"], depth["MetricName"]) == (
        "AWS/SQS", "ApproximateNumberOfMessagesVisible")
    assert depth["Dimensions"][0]["Value"] == {"Fn::GetAtt": ["FailedInvocations", "QueueName"]}
    for props in alarms.values():
        for actions in ("AlarmActions", "OKActions"):
            assert props[actions]["Fn::If"][0] == "HasAlarmTopic"
            assert props[actions]["Fn::If"][1] == [{"Ref": "AlarmTopicArn"}]


def test_timeout_default_is_just_under_the_schedule_period() -> None:
    from cfnlint.decode import decode_str

    template, _ = decode_str((ROOT / "template.yaml").read_text())
    params = template["Parameters"]
    assert params["ScheduleExpression"]["Default"] == "rate(1 minute)"
    assert 45 <= params["TimeoutSeconds"]["Default"] < 60


@pytest.mark.parametrize(("key", "value", "needle"), [
    ("Runtime", "python2.9", "'python2.9' is not one of"),
    ("Timeout", 1000, "1000 is greater than the maximum of 900"),
])
def test_lint_catches_a_broken_template(key: str, value: Any, needle: str) -> None:
    def breaking(props: dict[str, Any]) -> None:
        props[key] = value

    found = [m for m in lint(transformed(breaking)) if m.startswith("E")]
    assert any(needle in m for m in found), found


def _unit_dir(tmp_path: Path) -> Path:
    """The units with ExecStart pointing at this machine's awc (verify checks
    that the binary exists)."""
    awc = shutil.which("awc") or str(Path(sys.executable).parent / "awc")
    target = tmp_path / "units"
    target.mkdir()
    for unit in CRON.glob("*.service"):
        (target / unit.name).write_text(unit.read_text().replace("/usr/local/bin/awc", awc))
    for unit in CRON.glob("*.timer"):
        shutil.copy(unit, target / unit.name)
    return target


def test_systemd_units_verify_without_a_warning(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze (Debian package systemd) is not installed; "
                    ".ci/run installs it")
    units = _unit_dir(tmp_path)
    names = sorted(p.name for p in units.iterdir())
    assert names == ["awc-loop.service", "awc-tick.service", "awc-tick.timer"]
    done = subprocess.run([analyze, "verify", *[str(units / n) for n in names]],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "SYSTEMD_LOG_LEVEL": "warning"})
    assert done.stderr == "" and done.returncode == 0, done.stderr


def test_units_say_what_the_spec_asks() -> None:
    tick = (CRON / "awc-tick.service").read_text()
    timer = (CRON / "awc-tick.timer").read_text()
    loop = (CRON / "awc-loop.service").read_text()
    assert "Type=oneshot" in tick and "TimeoutStartSec=" in tick
    assert "LoadCredential=database-url:" in tick
    assert "AWC_DATABASE_URL_FILE=%d/database-url" in tick
    for hardening in ("ProtectSystem=strict", "NoNewPrivileges=yes", "PrivateTmp=yes"):
        assert hardening in tick and hardening in loop
    for line in ("OnCalendar=*-*-* *:*:00", "AccuracySec=1s", "Persistent=true",
                 "RandomizedDelaySec="):
        assert line in timer
    assert "Restart=on-failure" in loop
    # A file:// store needs a directory the dynamic user may write.
    assert "StateDirectory=awc" in tick and "StateDirectory=awc" in loop
    stop = int(re.search(r"TimeoutStopSec=(\d+)", loop).group(1))  # type: ignore[union-attr]
    grace = int(re.search(r"AWC_STOP_GRACE_SECS=(\d+)", loop).group(1))  # type: ignore[union-attr]
    assert stop > grace


CRON_FIELD = re.compile(r"^(\*|\d+(-\d+)?)(/\d+)?(,(\*|\d+(-\d+)?)(/\d+)?)*$")


def test_the_crontab_line_parses() -> None:
    lines = [ln for ln in (CRON / "awc-tick").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#") and "=" not in ln.split()[0]]
    assert len(lines) == 1
    fields = lines[0].split(None, 6)
    minute, hour, dom, month, dow, user, command = fields
    for value in (minute, hour, dom, month, dow):
        assert CRON_FIELD.match(value), value
    assert user == "awc"
    assert "flock -n" in command and "timeout " in command and "/usr/local/bin/awc tick" in command
    assert ">>" in command and "2>&1" in command
    # The command is valid shell.
    assert subprocess.run(["sh", "-n", "-c", command], timeout=10).returncode == 0


def test_the_crontab_line_reads_its_settings_from_awc_env(tmp_path: Path) -> None:
    # Issue 22 item 20: settings live in /etc/awc/awc.env, which a re-install
    # never overwrites; the cron line must hand them to awc.
    (line,) = [ln for ln in (CRON / "awc-tick").read_text().splitlines()
               if ln.startswith("* ")]
    command = line.split(None, 6)[6]
    settings = tmp_path / "awc.env"
    settings.write_text("AWC_CAS_URL=file:///srv/awc/store\nAWC_HANDLER_MODULES=myapp.jobs\n")
    log = tmp_path / "tick.log"
    command = (command.replace("/etc/awc/awc.env", str(settings))
               .replace("/usr/local/bin/awc tick --as-events", "/usr/bin/env")
               .replace("/var/log/awc/tick.log", str(log))
               .replace("/run/lock/awc-tick.lock", str(tmp_path / "lock")))
    done = subprocess.run(["sh", "-c", command], timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert done.returncode == 0
    seen = log.read_text().splitlines()
    assert "AWC_CAS_URL=file:///srv/awc/store" in seen and "AWC_HANDLER_MODULES=myapp.jobs" in seen


@pytest.mark.timeout(600)
def test_build_script_makes_an_arm64_zip(tmp_path: Path) -> None:
    out = tmp_path / "awc-lambda.zip"
    # An operator's own handler package goes into the same zip (README, "AWS Lambda").
    app = tmp_path / "myapp"
    (app / "myapp").mkdir(parents=True)
    (app / "myapp" / "__init__.py").write_text("")
    (app / "myapp" / "jobs.py").write_text(
        "from tick import handler\n\n@handler('myapp_job')\ndef run(ctx, payload):\n"
        "    return {}\n")
    (app / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=68"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "myapp"\nversion = "1.0"\n[tool.setuptools]\npackages = ["myapp"]\n')
    with building_the_checkout():  # pip builds the checkout in place
        done = subprocess.run(["bash", str(ROOT / "scripts" / "build_lambda.sh"), str(out),
                               str(app)], cwd=ROOT, capture_output=True, text=True, timeout=540,
                              env={**os.environ, "BUILD_DIR": str(tmp_path / "build")})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    names = zipfile.ZipFile(out).namelist()
    assert "tick/drivers/aws_lambda.py" in names and "tick/migrations/0001_jobs.sql" in names
    assert "tick/handlers/kinds/gc_sweep.py" in names
    assert "myapp/jobs.py" in names
    binary = [n for n in names if n.startswith("psycopg_binary/") and n.endswith(".so")]
    assert binary and all("aarch64" in n or "x86_64" not in n for n in binary)
    assert "resolved psycopg" in done.stdout


@pytest.mark.timeout(300)
@pytest.mark.parametrize("mode", ["cron", "timer"])
def test_the_host_install_script_lays_out_every_file(tmp_path: Path, mode: str) -> None:
    # README, "Deploying": the steps a clean Debian host needs, run into a
    # scratch root. pip installs awc without its dependencies here (this
    # test is about the layout; the suite runs awc itself everywhere else).
    root = tmp_path / "root"
    with building_the_checkout():  # pip builds the checkout in place
        done = subprocess.run(["sh", str(CRON / "install-host.sh"), mode, str(ROOT)],
                              env={**os.environ, "DESTDIR": str(root), "PIP_ARGS": "--no-deps"},
                              capture_output=True, text=True, timeout=280)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert (root / "usr/local/bin/awc").is_symlink()
    assert os.readlink(root / "usr/local/bin/awc") == "/opt/awc/bin/awc"
    assert (root / "opt/awc/bin/awc").is_file()
    secret = root / "etc/awc/database-url"
    assert secret.is_file() and secret.stat().st_mode & 0o777 == 0o600
    assert (root / "var/log/awc").is_dir()
    # The system's Python, whatever python3 comes first on root's PATH (a
    # pyenv one lives where the awc user cannot read).
    cfg = (root / "opt/awc/pyvenv.cfg").read_text()
    assert "home = /usr/bin" in cfg.splitlines()
    if mode == "cron":
        installed = list((root / "etc/cron.d").iterdir())
        assert [p.name for p in installed] == ["awc-tick"]  # no dot in the name
        assert "." not in installed[0].name
        rotate = (root / "etc/logrotate.d/awc").read_text()
        assert "/var/log/awc/*.log" in rotate and "su awc awc" in rotate
        assert (root / "var/lib/awc").is_dir()
    else:
        units = sorted(p.name for p in (root / "etc/systemd/system").iterdir())
        assert units == ["awc-loop.service", "awc-tick.service", "awc-tick.timer"]
    # Safe to repeat (issue 22 item 20): what the operator changed is kept;
    # the shipped driver file lands beside a changed one as NAME.new.
    settings = root / "etc/awc/awc.env"
    assert settings.read_text() == (CRON / "awc.env").read_text()
    settings.write_text("AWC_CAS_URL=s3://the-operators-bucket/awc\n")
    (root / "etc/awc/database-url").write_text("postgresql://awc@db/awc\n")
    driver = (root / "etc/cron.d/awc-tick" if mode == "cron"
              else root / "etc/systemd/system/awc-tick.timer")
    driver.write_text(driver.read_text() + "# changed by the operator\n")
    untouched = root / "etc/systemd/system/awc-loop.service"
    # The default package (no second argument) is the checkout the script is in.
    with building_the_checkout():  # pip builds the checkout in place
        again = subprocess.run(["sh", str(CRON / "install-host.sh"), mode],
                               env={**os.environ, "DESTDIR": str(root), "PIP_ARGS": "--no-deps"},
                               capture_output=True, text=True, timeout=280)
    assert again.returncode == 0, again.stderr[-2000:]
    assert settings.read_text() == "AWC_CAS_URL=s3://the-operators-bucket/awc\n"
    assert (root / "etc/awc/database-url").read_text() == "postgresql://awc@db/awc\n"
    assert driver.read_text().endswith("# changed by the operator\n")
    assert Path(f"{driver}.new").read_text() == (CRON / driver.name).read_text()
    assert f"kept your {driver}" in again.stdout
    if mode != "cron":
        assert not Path(f"{untouched}.new").exists()
