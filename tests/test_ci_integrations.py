"""The GitHub Action (``action.yml``) and the pre-commit hook (``.pre-commit-hooks.yaml``) work as shipped.

Fast (default run): both files have the shape their hosts read (a composite action with setup-python,
an install of the action's own checkout, ``dpharness gate --module ... --own --junit ...`` and an
upload of the JUnit file and the reports; a ``language: python`` hook with ``pass_filenames: false``), every
``${{ inputs.X }}`` the action reads is declared, no input is pasted into a shell script (each reaches
it through ``env``), and the README's CI snippets use them with the team's module named explicitly.

Slow (``.ci/run``'s dev stage, ``integrations``): a fresh venv in a scratch directory stands in for
setup-python (and for pre-commit's hook environment), and the action's ``run`` steps are executed as
GitHub would run them (bash, their ``env`` with the expressions filled in: ``github.action_path`` a copy of
this checkout, the inputs from the README's workflow plus a smaller ``samples``) on a sample team project
whose package is quick start 1's ``pagestats`` from the README. The gate exits 0 and writes the JUnit
file and the reports the upload step names; the hook's entry with the README's args exits 0 from the
project's root. With the noise cut (the mechanism no longer PROVED) the same steps and the hook exit
non-zero."""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys

import pytest
import yaml

from _readme import ROOT, blocks, yaml_block

ACTION = os.path.join(ROOT, "action.yml")
HOOKS = os.path.join(ROOT, ".pre-commit-hooks.yaml")
_EXPR = re.compile(r"\$\{\{\s*([\w.-]+)\s*\}\}")
SAMPLES = "200000"  # audit samples per side in the slow run (the action's `samples` input)


def _action() -> dict:
    with open(ACTION, encoding="utf-8") as f:
        return yaml.safe_load(f)


def _hook() -> dict:
    with open(HOOKS, encoding="utf-8") as f:
        hooks = yaml.safe_load(f)
    (hook,) = [h for h in hooks if h["id"] == "dpharness-gate"]
    return hook


def _readme_action_inputs() -> dict:
    workflow = yaml.safe_load(yaml_block(".github/workflows/dp-gate.yml"))
    steps = [s for job in workflow["jobs"].values() for s in job["steps"]]
    (use,) = [s for s in steps if s.get("uses", "").split("@")[0].endswith("/dpharness")]
    return dict(use.get("with") or {})


def _readme_hook_args() -> list[str]:
    config = yaml.safe_load(yaml_block(".pre-commit-config.yaml"))
    hooks = [h for repo in config["repos"] for h in repo["hooks"] if h["id"] == "dpharness-gate"]
    (hook,) = hooks
    return [str(a) for a in hook.get("args", [])]


def _fill(value: str, context: dict) -> str:
    """A step's expression ``${{ inputs.X }}`` / ``${{ github.action_path }}`` filled in from ``context``."""

    def one(m: re.Match) -> str:
        assert m.group(1) in context, f"action.yml reads ${{{{ {m.group(1)} }}}}, which the test does not provide"
        return str(context[m.group(1)])

    return _EXPR.sub(one, str(value))


# --------------------------------------------------------------------------- fast


def test_action_is_a_composite_that_installs_the_checkout_and_gates_the_module():
    action = _action()
    inputs = action["inputs"]
    assert {"module", "python-version", "pip-args"} <= set(inputs)
    assert inputs["module"].get("required") is True
    assert action["runs"]["using"] == "composite"
    steps = action["runs"]["steps"]
    assert steps[0]["uses"].startswith("actions/setup-python@")
    assert steps[0]["with"]["python-version"] == "${{ inputs.python-version }}"
    runs = [s for s in steps if "run" in s]
    assert all(s.get("shell") == "bash" for s in runs), "a composite action's run step must name its shell"
    assert any("github.action_path" in str(s.get("env", {})) and "pip install" in s["run"] for s in runs)
    (gate,) = [s for s in runs if s["run"].startswith("dpharness gate")]
    words = gate["run"].split()
    assert {"--module", "--own", "--junit", "--report"} <= set(words)
    upload = steps[-1]
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"] == "always()"
    assert "inputs.junit" in upload["with"]["path"] and "inputs.reports" in upload["with"]["path"]
    with open(ACTION, encoding="utf-8") as f:
        used = {m.group(1) for m in _EXPR.finditer(f.read())}
    assert used <= {f"inputs.{k}" for k in inputs} | {"github.action_path"}, used
    for s in runs:  # inputs reach a script through env only: never pasted into its text (script injection)
        assert "${{" not in s["run"], s["run"]


def test_hook_is_a_python_hook_running_the_gate_once():
    hook = _hook()
    assert hook["language"] == "python"
    assert hook["pass_filenames"] is False
    assert shlex.split(hook["entry"])[:2] == ["dpharness", "gate"]
    assert "--own" in shlex.split(hook["entry"])


def test_readme_ci_snippets_gate_the_teams_module():
    assert _readme_action_inputs().get("module") == "pagestats"
    args = _readme_hook_args()
    assert args[args.index("--module") + 1] == "pagestats"
    ci = next(i for i, b in enumerate(blocks()) if b.lang == "yaml")
    assert not any("pip install dpharness" in b.code for b in blocks()[ci:])


# --------------------------------------------------------------------------- slow: from a fresh venv


def _copy_checkout(dest: str) -> None:
    """This checkout as the action's checkout: its files, without venvs, caches and build output."""
    ignore = shutil.ignore_patterns(
        ".git", ".venv*", "build", "dist", "*.egg-info", "__pycache__", ".dpharness-cache", "_build", ".hypothesis",
        ".pytest_cache", "mutants",
    )  # fmt: skip
    shutil.copytree(ROOT, dest, ignore=ignore)


def _project(root) -> None:
    """A sample team project: quick start 1's package from the README, installable with pip."""
    (file_block,) = [b for b in blocks() if b.path == "pagestats/__init__.py"]
    (root / "pagestats").mkdir(parents=True)
    (root / "pagestats" / "__init__.py").write_text(file_block.code, encoding="utf-8")
    (root / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n\n'
        '[project]\nname = "pagestats"\nversion = "0.0.1"\n\n[tool.setuptools]\npackages = ["pagestats"]\n',
        encoding="utf-8",
    )


def _run_action(context: dict, cwd, env) -> list[subprocess.CompletedProcess]:
    """Each run step of the action, as GitHub runs it: bash, the step's env filled in, in order; stops at
    the first failure (as a job does)."""
    done = []
    for step in _action()["runs"]["steps"]:
        if "run" not in step:
            continue
        step_env = dict(env, **{k: _fill(v, context) for k, v in (step.get("env") or {}).items()})
        out = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", _fill(step["run"], context)], cwd=cwd, env=step_env, capture_output=True, text=True,
            timeout=1800,
        )  # fmt: skip
        done.append(out)
        if out.returncode:
            break
    return done


@pytest.mark.slow
@pytest.mark.statistical
def test_action_and_hook_run_green_from_a_fresh_venv_and_red_on_a_broken_mechanism(tmp_path):
    """A fresh venv, this checkout installed by the action's own step, a sample project. The audits have
    a fixed seed; over the choice of seed the correct mechanism's audit fails with probability at most
    5% (confidence 0.95), and for this seed it passes: it was run."""
    venv, action_path, project = tmp_path / "venv", tmp_path / "dpharness-action", tmp_path / "project"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)
    _copy_checkout(str(action_path))
    _project(project)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env.update(
        PATH=f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}",  # setup-python: this python and its scripts first
        VIRTUAL_ENV=str(venv),
        XDG_CONFIG_HOME=str(tmp_path / "config"),  # the cache key file, not the user's
        PIP_DISABLE_PIP_VERSION_CHECK="1",
    )
    action = _action()
    inputs = {f"inputs.{k}": (v.get("default") or "") for k, v in action["inputs"].items()}
    inputs.update({f"inputs.{k}": v for k, v in _readme_action_inputs().items()})
    inputs["inputs.samples"] = SAMPLES
    context = dict(inputs, **{"github.action_path": str(action_path)})
    hook = _hook()
    hook_argv = shlex.split(hook["entry"]) + _readme_hook_args() + ["--samples", SAMPLES]

    def show(runs):
        return "\n".join(f"exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}" for r in runs)

    runs = _run_action(context, project, env)
    assert len(runs) == 3 and all(r.returncode == 0 for r in runs), show(runs)
    assert "PASS  visits_per_page" in runs[-1].stdout, runs[-1].stdout
    junit = project / inputs["inputs.junit"]
    assert junit.exists() and 'name="visits_per_page"' in junit.read_text(encoding="utf-8")
    assert (project / inputs["inputs.reports"] / "visits_per_page.html").exists()
    ran = subprocess.run(hook_argv, cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert ran.returncode == 0, show([ran])

    source = project / "pagestats" / "__init__.py"
    source.write_text(
        source.read_text(encoding="utf-8").replace("dp.laplace(epsilon=0.5)", "dp.laplace(epsilon=1)"), encoding="utf-8"
    )
    runs = _run_action(context, project, env)
    assert runs[-1].returncode != 0 and "FAIL  visits_per_page" in runs[-1].stdout, show(runs)
    ran = subprocess.run(hook_argv, cwd=project, env=env, capture_output=True, text=True, timeout=900)
    assert ran.returncode != 0 and "FAIL  visits_per_page" in ran.stdout, show([ran])
