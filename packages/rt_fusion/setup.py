"""ament_python build of rt_fusion: the same file serves colcon on the vehicle and pip here.

This folder is the package colcon sees (packages/rt_fusion beside packages/rt_fusion_msgs, so a
clone in any ``ws/src`` yields both); ``rt_fusion``, ``tools``, ``launch``, ``config`` and
``models`` here are links to the repository's top-level folders, where everyone edits them.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from setuptools import find_packages, setup
from setuptools.command.develop import develop
from setuptools.command.install_scripts import install_scripts

PACKAGE = 'rt_fusion'
HERE = Path(__file__).resolve().parent


def _tree(folder: str) -> list[tuple[str, list[str]]]:
    """(install dir, files) pairs that install folder/ under share/rt_fusion/folder/."""
    pairs: dict[str, list[str]] = {}
    # followlinks: the folder itself is a link to the repository's top level.
    for top, dirs, files in os.walk(HERE / folder, followlinks=True):
        dirs[:] = sorted(d for d in dirs if d != '__pycache__')
        rel = Path(top).relative_to(HERE)
        for name in sorted(files):
            pairs.setdefault(f'share/{PACKAGE}/{rel}', []).append(str(rel / name))
    return sorted(pairs.items())


NODES = {
    'frame_probe': 'rt_fusion.nodes.frame_probe_node:main',
    'radar_node': 'rt_fusion.nodes.radar_node:main',
    'imu_node': 'rt_fusion.nodes.imu_node:main',
    'camera_node': 'rt_fusion.nodes.camera_node:main',
    'microphone_node': 'rt_fusion.nodes.microphone_node:main',
    'trajectory_node': 'rt_fusion.nodes.trajectory_node:main',
    'fusion_node': 'rt_fusion.nodes.fusion_node:main',
    'replay_node': 'rt_fusion.nodes.replay_node:main',
    'sim_node': 'rt_fusion.nodes.sim_node:main',
    'calibration_node': 'rt_fusion.nodes.calibration_node:main',
    'bringup_node': 'rt_fusion.nodes.bringup_node:main',
    'viewer_node': 'rt_fusion.nodes.viewer_node:main',
}
TOOLS = {
    'rt_fusion_demo': 'rt_fusion_tools.demo:main',
    'rt_fusion_topic_echo': 'rt_fusion_tools.topic_echo:main',
    'rt_fusion_can_replay': 'rt_fusion_tools.can_replay:main',
    'rt_fusion_ars408_log': 'rt_fusion_tools.ars408_log:main',
    'rt_fusion_xsens_emulator': 'rt_fusion_tools.xsens_emulator:main',
    'rt_fusion_bench_transport': 'rt_fusion_tools.bench_transport:main',
    'rt_fusion_bench_sync': 'rt_fusion_tools.bench_sync:main',
    'rt_fusion_bench_protocols': 'rt_fusion_tools.bench_protocols:main',
    'rt_fusion_bench_sensors': 'rt_fusion_tools.bench_sensors:main',
    'rt_fusion_bench_inference': 'rt_fusion_tools.bench_inference:main',
    'rt_fusion_build_engine': 'rt_fusion_tools.build_engine:main',
    'rt_fusion_make_test_model': 'rt_fusion_tools.make_test_model:main',
    'rt_fusion_rt_check': 'rt_fusion_tools.rt_check:main',
    'rt_fusion_bench_planner': 'rt_fusion_tools.bench_planner:main',
    'rt_fusion_make_scenario': 'rt_fusion_tools.make_scenario:main',
    'rt_fusion_record': 'rt_fusion_tools.record:main',
    'rt_fusion_alsa_feeder': 'rt_fusion_tools.alsa_feeder:main',
}

# The executables colcon installs into lib/rt_fusion. setuptools' own wrappers look the package's
# metadata up first, so a shell that has not sourced the workspace got a PackageNotFoundError
# traceback; these import the entry point directly and say in one line what to source.
WRAPPER = """{shebang}
# {name}: rt_fusion executable (packages/rt_fusion/setup.py writes it in place of setuptools')
import sys

try:
    from {module} import {func}
except ImportError as err:
    if isinstance(err, ModuleNotFoundError) and err.name and err.name.split('.')[0] not in (
        'rt_fusion', 'rt_fusion_tools', 'rclpy', 'rt_fusion_msgs'
    ):
        raise
    why = str(err) if 'source /opt/ros' in str(err) else (
        f'{{err.name}} is not on this Python path: source /opt/ros/<distro>/setup.bash and '
        "your workspace's install/setup.bash first"
    )
    sys.exit(f'{name}: {{why}}')
sys.exit({func}())
"""
ENTRY = re.compile(r"EASY-INSTALL-ENTRY-SCRIPT: 'rt[-_]fusion','console_scripts','([^']+)'")


def _write_wrappers(folder: str) -> None:
    """Replaces setuptools' entry-point wrappers in ``folder`` with :data:`WRAPPER`."""
    targets = {**NODES, **TOOLS}
    for path in sorted(Path(folder).glob('*')) if Path(folder).is_dir() else ():
        text = path.read_text(errors='replace') if path.is_file() else ''
        m = ENTRY.search(text)
        if m is None or m[1] not in targets:
            continue
        module, func = targets[m[1]].split(':')
        shebang = text.splitlines()[0]
        path.write_text(WRAPPER.format(shebang=shebang, name=m[1], module=module, func=func))


class Develop(develop):
    """``setup.py develop`` (colcon --symlink-install), then rt_fusion's own wrappers."""

    def install_wrapper_scripts(self, dist):  # type: ignore[no-untyped-def]
        super().install_wrapper_scripts(dist)
        _write_wrappers(self.script_dir)


class InstallScripts(install_scripts):
    """``setup.py install`` (colcon without --symlink-install), then rt_fusion's wrappers."""

    def run(self) -> None:
        super().run()
        _write_wrappers(self.install_dir)


setup(
    name=PACKAGE,
    cmdclass={'develop': Develop, 'install_scripts': InstallScripts},
    version='0.1.0',
    packages=[*find_packages(include=[PACKAGE, f'{PACKAGE}.*']), 'rt_fusion_tools'],
    package_dir={'rt_fusion_tools': 'tools'},
    package_data={PACKAGE: ['py.typed', 'core/protocols/*.dbc', 'ros/viewer/static/*.html']},
    data_files=[
        ('share/ament_index/resource_index/packages', [f'resource/{PACKAGE}']),
        (f'share/{PACKAGE}', ['package.xml']),
        *_tree('launch'),
        *_tree('config'),
        *_tree('models'),
    ],
    install_requires=['setuptools'],
    zip_safe=False,
    maintainer='rt_fusion developers',
    maintainer_email='dev@rt-fusion.invalid',
    description='Real-time multi-sensor perception and planning for rclpy.',
    license='Apache-2.0',
    entry_points={
        'console_scripts': [f'{name} = {target}' for name, target in {**NODES, **TOOLS}.items()],
    },
)
