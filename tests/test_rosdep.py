"""Every dependency key of every package.xml resolves in ros/rosdistro's rosdep database, for each
distribution the vehicle may run (Jazzy on JetPack 7.2 / Ubuntu 24.04, Humble on JetPack 6.2 /
Ubuntu 22.04, Kilted), against the offline snapshot in ../shared/rosdep: a key that resolves
nowhere makes `rosdep install` stop on the vehicle before anything is built."""

from __future__ import annotations

import os
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from catkin_pkg.package import parse_package

from tests.conftest import ROOT, VENV

SNAPSHOT = ROOT.parent / 'shared' / 'rosdep'
# (distribution, Ubuntu release it is built for on the vehicle)
TARGETS = [('jazzy', 'noble'), ('kilted', 'noble'), ('humble', 'jammy')]
MANIFESTS = [ROOT / 'packages/rt_fusion/package.xml', ROOT / 'packages/rt_fusion_msgs/package.xml']

try:
    _Loader: Any = yaml.CSafeLoader
except AttributeError:  # PyYAML without libyaml
    _Loader = yaml.SafeLoader


def _snapshot() -> Path:
    if not (SNAPSHOT / 'rosdep' / 'base.yaml').is_file():
        pytest.skip(f'no rosdep snapshot at {SNAPSHOT} (the shared folder)')
    return SNAPSHOT


@cache
def _system_keys() -> dict[str, Any]:
    keys: dict[str, Any] = {}
    for name in ('base.yaml', 'python.yaml'):
        keys.update(yaml.load((_snapshot() / 'rosdep' / name).read_text(), Loader=_Loader))
    return keys


@cache
def _ros_packages(distro: str) -> frozenset[str]:
    dist = yaml.load((_snapshot() / distro / 'distribution.yaml').read_text(), Loader=_Loader)
    names: set[str] = set()
    for repo_name, repo in dist['repositories'].items():
        release = repo.get('release')
        if release:
            names.update(release.get('packages', [repo_name]))
    return frozenset(names)


def _resolves_on_ubuntu(rule: Any, release: str) -> bool:
    """Whether a rosdep rule has an installer entry for Ubuntu ``release``."""
    if not isinstance(rule, dict) or 'ubuntu' not in rule:
        return False
    ubuntu = rule['ubuntu']
    if isinstance(ubuntu, list):
        return bool(ubuntu)
    if isinstance(ubuntu, dict):
        if 'pip' in ubuntu or 'apt' in ubuntu or 'source' in ubuntu:
            return True
        entry = ubuntu.get(release, ubuntu.get('*'))
        return entry is not None and entry != []
    return False


def _keys(path: Path) -> set[str]:
    pkg = parse_package(str(path))
    deps = (
        pkg.build_depends
        + pkg.buildtool_depends
        + pkg.build_export_depends
        + pkg.buildtool_export_depends
        + pkg.exec_depends
        + pkg.test_depends
        + pkg.doc_depends
    )
    return {dep.name for dep in deps}  # (member_of_group names a group, not a key)


WORKSPACE = {parse_package(str(p)).name for p in MANIFESTS}


@pytest.mark.parametrize(('distro', 'release'), TARGETS)
def test_every_package_xml_key_resolves(distro: str, release: str) -> None:
    system = _system_keys()
    ros = _ros_packages(distro)
    unresolved: dict[str, list[str]] = {}
    for manifest in MANIFESTS:
        for key in sorted(_keys(manifest) - WORKSPACE):
            if key in ros:
                continue
            if key in system and _resolves_on_ubuntu(system[key], release):
                continue
            unresolved.setdefault(parse_package(str(manifest)).name, []).append(key)
    assert not unresolved, (
        f'keys with no rosdep rule for {distro} on Ubuntu {release}: {unresolved} '
        '(an optional Python package with no key goes to requirements-vehicle.txt)'
    )


def test_the_key_check_catches_a_key_that_resolves_nowhere() -> None:
    # The check above must be able to fail: the key an earlier package.xml had.
    assert 'python3-onnx-pip' not in _system_keys()
    assert 'python3-onnx-pip' not in _ros_packages('jazzy')
    assert _resolves_on_ubuntu(_system_keys()['python3-onnxruntime-pip'], 'noble')
    assert not _resolves_on_ubuntu({'debian': ['x']}, 'noble')


def _rosdep_env(tmp_path: Path) -> dict[str, str]:
    """rosdep pointed at the snapshot, as a sources list and a rosdistro index would on a vehicle
    with the online database, with a cache of its own."""
    snap = _snapshot()
    sources = tmp_path / 'sources.list.d'
    sources.mkdir()
    (sources / '20-default.list').write_text(
        ''.join(f'yaml file://{snap}/rosdep/{name}\n' for name in ('base.yaml', 'python.yaml'))
    )
    index = {
        'type': 'index',
        'version': 4,
        'distributions': {
            distro: {
                'distribution': [f'file://{snap}/{distro}/distribution.yaml'],
                'distribution_status': 'active',
                'distribution_type': 'ros2',
                'python_version': 3,
            }
            for distro, _ in TARGETS
        },
    }
    (tmp_path / 'index-v4.yaml').write_text(yaml.safe_dump(index))
    return {
        **os.environ,
        'ROSDEP_SOURCE_PATH': str(sources),
        'ROSDISTRO_INDEX_URL': f'file://{tmp_path}/index-v4.yaml',
        'ROS_HOME': str(tmp_path / 'ros_home'),
    }


@pytest.mark.integration
@pytest.mark.parametrize(('distro', 'release'), TARGETS)
def test_rosdep_install_simulated_resolves_everything(
    tmp_path: Path, distro: str, release: str
) -> None:
    rosdep = VENV / 'bin' / 'rosdep'
    if not rosdep.exists():
        pytest.skip(f'rosdep not installed in {VENV.name} (make setup installs it)')
    env = _rosdep_env(tmp_path)
    update = subprocess.run(
        [str(rosdep), 'update', f'--rosdistro={distro}'],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert update.returncode == 0, update.stdout + update.stderr
    # The packages of a clone under ws/src, as `rosdep install --from-paths src` finds them.
    install = subprocess.run(
        [
            str(rosdep),
            'install',
            '--from-paths',
            str(ROOT / 'packages'),
            '--ignore-src',
            '--simulate',
            '--default-yes',
            f'--rosdistro={distro}',
            f'--os=ubuntu:{release}',
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    out = install.stdout + install.stderr
    assert install.returncode == 0, out
    assert 'Cannot locate rosdep definition' not in out, out
    # What it would install: the apt and pip commands (or nothing, where all are present).
    assert 'apt-get install' in out or 'pip' in out or 'All required rosdeps' in out, out
