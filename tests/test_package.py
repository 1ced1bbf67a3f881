"""The package itself: manifest, ROS-free core, and the environment that `make setup` builds."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
from catkin_pkg.package import parse_package

from tests.conftest import ROOT, VENV

# Top-level module imported by rt_fusion -> the package.xml key that provides it.
MODULE_TO_KEY = {
    'rclpy': 'rclpy',
    'builtin_interfaces': 'builtin_interfaces',
    'std_msgs': 'std_msgs',
    'sensor_msgs': 'sensor_msgs',
    'geometry_msgs': 'geometry_msgs',
    'nav_msgs': 'nav_msgs',
    'diagnostic_msgs': 'diagnostic_msgs',
    'rosgraph_msgs': 'rosgraph_msgs',
    'lifecycle_msgs': 'lifecycle_msgs',
    'rcl_interfaces': 'rclpy',  # shipped with rclpy's runtime
    'ament_index_python': 'ament_index_python',
    'launch': 'launch',
    'launch_ros': 'launch_ros',
    'rt_fusion_msgs': 'rt_fusion_msgs',
    'tf2_msgs': 'tf2_msgs',
    'vision_msgs': 'vision_msgs',
    'visualization_msgs': 'visualization_msgs',
    'std_srvs': 'std_srvs',
    'radar_msgs': 'radar_msgs',
    'numpy': 'python3-numpy',
    'yaml': 'python3-yaml',
    'scipy': 'python3-scipy',
    'numba': 'python3-numba',
    'cv2': 'python3-opencv',
    'serial': 'python3-serial',
    'can': 'python3-can',
    'matplotlib': 'python3-matplotlib',
    'rich': 'python3-rich',
    'cantools': 'python3-cantools-pip',
    'sounddevice': 'python3-sounddevice-pip',
    'rosbags': 'python3-rosbags-pip',
    'onnxruntime': 'python3-onnxruntime-pip',
    'websockets': 'python3-websockets',
    'google': 'python3-protobuf',  # google.protobuf
}
# Optional: imported lazily where present, never required by the nodes; no rosdep key, so they
# are in requirements-vehicle.txt (onnx: model export and tools/make_test_model.py only).
# foxglove (foxglove-sdk): no rosdep key exists; the vehicle installs it from PyPI
# (requirements-vehicle.txt) and viewer_node says so where it is missing.
# Imported only where present; iceoryx2 and zenoh only by the transport benchmark's peers
# (tools/bench_transport.py --peers; no rosdep key, no aarch64 wheel). soundfile: the hearing's
# training and its real-recording check only (rt_fusion/training/sounds.py).
OPTIONAL = {
    'torch', 'tensorrt', 'pycuda', 'cuda', 'cupy', 'onnx2torch', 'onnx', 'foxglove', 'iceoryx2',
    'zenoh', 'soundfile', 'trackeval',
}  # fmt: skip
IMPORT_CHECK = 'import rclpy, rt_fusion, rt_fusion_msgs.msg; print(rt_fusion_msgs.msg.ShmFrame)'
ROS_MODULES = {'rclpy', 'rcl_interfaces', 'rosidl_runtime_py', 'launch', 'launch_ros'}


def _imports(path: Path) -> set[str]:
    """Top-level names of every absolute import in a Python file (lazy imports included)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split('.')[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split('.')[0])
    return names


def _full_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


@pytest.mark.parametrize('folder', ['rt_fusion/core', 'rt_fusion/inference'])
def test_core_and_inference_never_import_ros(folder: str) -> None:
    offenders = []
    for path in sorted((ROOT / folder).rglob('*.py')):
        for name in _full_imports(path):
            top = name.split('.')[0]
            if top in ROS_MODULES or top.endswith('_msgs') or name.startswith('rt_fusion.nodes'):
                offenders.append(f'{path.relative_to(ROOT)}: import {name}')
    assert not offenders, 'ROS imports in the ROS-free core:\n' + '\n'.join(offenders)


# What the core may import besides the standard library: the rule README's "Layout" states.
CORE_DEPENDENCIES = {'numpy', 'scipy', 'cv2', 'yaml', 'cantools', 'rosbags', 'numba'}


def test_the_core_imports_what_its_rule_says() -> None:
    import sys  # noqa: PLC0415

    found: dict[str, set[str]] = {}
    for path in sorted((ROOT / 'rt_fusion' / 'core').rglob('*.py')):
        for name in _full_imports(path):
            top = name.split('.')[0]
            if name.startswith(('rt_fusion.ros', 'rt_fusion.nodes', 'rt_fusion.inference')):
                found.setdefault(name, set()).add(path.name)  # no arrow back up
            elif (
                top
                not in {*sys.stdlib_module_names, 'rt_fusion', '__future__'} | CORE_DEPENDENCIES
            ):
                found.setdefault(top, set()).add(path.name)
    assert not found, f'the core imports beyond its rule: {found}'
    readme = (ROOT / 'README.md').read_text()
    assert all(f'`{dep}`' in readme for dep in CORE_DEPENDENCIES)


def test_core_scan_catches_a_ros_import(tmp_path: Path) -> None:
    # The scan itself must see imports hidden in functions and `from x.y import z` forms.
    probe = tmp_path / 'probe.py'
    probe.write_text('def f():\n    from sensor_msgs.msg import Image\n    import rclpy.node\n')
    assert _full_imports(probe) == {'sensor_msgs.msg', 'rclpy.node'}


def test_package_xml_is_valid_format_3() -> None:
    pkg = parse_package(
        str(ROOT / 'packages/rt_fusion/package.xml')
    )  # raises InvalidPackage when invalid
    pkg.validate()
    assert pkg.package_format == 3
    assert pkg.name == 'rt_fusion'
    assert pkg.get_build_type() == 'ament_python'
    msgs = parse_package(str(ROOT / 'packages/rt_fusion_msgs/package.xml'))
    msgs.validate()
    assert msgs.package_format == 3
    assert msgs.get_build_type() == 'ament_cmake'


def test_package_xml_lists_every_imported_dependency() -> None:
    pkg = parse_package(str(ROOT / 'packages/rt_fusion/package.xml'))
    declared = {dep.name for dep in pkg.exec_depends + pkg.build_depends}
    declared |= {dep.name for dep in pkg.test_depends}
    first_party = {'rt_fusion', 'rt_fusion_tools', 'tests'}
    missing: dict[str, list[str]] = {}
    for folder in ('rt_fusion', 'tools', 'launch'):
        for path in sorted((ROOT / folder).rglob('*.py')):
            for name in _imports(path):
                if name in sys.stdlib_module_names or name in first_party or name in OPTIONAL:
                    continue
                key = MODULE_TO_KEY.get(name)
                if key is None or key not in declared:
                    missing.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert not missing, f'imports without a package.xml dependency: {missing}'
    for required in (
        'rclpy',
        'std_msgs',
        'sensor_msgs',
        'geometry_msgs',
        'nav_msgs',
        'diagnostic_msgs',
        'rt_fusion_msgs',
    ):
        assert required in declared
    assert 'python3-pytest' in {dep.name for dep in pkg.test_depends}


def test_venv_imports_ros_and_rt_fusion_without_sourcing_anything() -> None:
    # A shell with nothing sourced and no ROS variables: only PATH and HOME.
    python = VENV / 'bin' / 'python'
    if not python.exists():
        pytest.skip(f'no {VENV.name}: run `make setup`')
    env = {'PATH': '/usr/bin:/bin', 'HOME': os.environ.get('HOME', '/tmp')}
    out = subprocess.run(
        [
            str(python),
            '-c',
            IMPORT_CHECK,
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert 'rt_fusion_msgs.msg._shm_frame.ShmFrame' in out.stdout


def test_the_colcon_package_links_the_repository_folders() -> None:
    """packages/rt_fusion is what colcon builds; its code and data are the top-level folders."""
    pkg = ROOT / 'packages' / 'rt_fusion'
    for name in ('rt_fusion', 'tools', 'launch', 'config', 'models'):
        link = pkg / name
        assert link.is_symlink(), f'{link} is not a link'
        assert link.resolve() == ROOT / name
    assert (ROOT / 'packages/rt_fusion_msgs/msg/ShmFrame.msg').is_file()
    # The repository root is not a package, or colcon would stop there and miss both.
    assert not (ROOT / 'package.xml').exists()
    assert not (ROOT / 'setup.py').exists()


def test_colcon_lists_both_packages_of_a_clone_in_a_workspace(tmp_path: Path) -> None:
    """`colcon list` in a workspace whose src/ holds the repository finds both packages."""
    colcon = VENV / 'bin' / 'colcon'
    if not colcon.exists():
        pytest.skip(f'colcon not installed in {VENV.name}')
    (tmp_path / 'src').mkdir()
    (tmp_path / 'src' / 'rt_fusion').symlink_to(ROOT)
    out = subprocess.run(
        [str(colcon), '--log-base', os.devnull, 'list'],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    listed = sorted(tuple(line.split('\t')[:2]) for line in out.stdout.splitlines())
    assert listed == [
        ('rt_fusion', 'src/rt_fusion/packages/rt_fusion'),
        ('rt_fusion_msgs', 'src/rt_fusion/packages/rt_fusion_msgs'),
    ], out.stdout


def test_tools_import_the_library_not_each_other() -> None:
    tools = {p.stem for p in (ROOT / 'tools').glob('*.py')} - {'__init__'}
    offenders = []
    for path in sorted((ROOT / 'tools').glob('*.py')):
        for node in ast.walk(ast.parse(path.read_text())):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module] + [f'{node.module}.{a.name}' for a in node.names]
            for name in names:
                parts = name.split('.')
                if parts[0] in tools or (parts[0] == 'rt_fusion_tools' and parts[-1] in tools):
                    offenders.append(f'{path.name}: {name}')
    assert not offenders, offenders


def test_tools_are_thin_command_lines() -> None:
    """Library code lives in the package: a tool is a command line over it (≤ 300 lines)."""
    long = {
        p.name: n
        for p in sorted((ROOT / 'tools').glob('*.py'))
        if (n := len(p.read_text().splitlines())) > 300
    }
    assert not long, f'tools over 300 lines (move their library parts into rt_fusion/): {long}'


def test_the_fusion_node_is_thin() -> None:
    """fusion_node declares, configures, converts and publishes; its rig, worker, parameters and
    messages live in rt_fusion/ros/fusion."""
    lines = len((ROOT / 'rt_fusion' / 'nodes' / 'fusion_node.py').read_text().splitlines())
    assert lines <= 400, lines


def _import_cycles(root: Path) -> list[list[str]]:
    """Groups of modules of ``root``'s ``rt_fusion`` that import each other (function-level
    imports included), by Tarjan's strongly connected components."""
    mods: dict[str, Path] = {}
    for p in (root / 'rt_fusion').rglob('*.py'):
        rel = p.relative_to(root).with_suffix('')
        mods['.'.join(rel.parts[:-1] if rel.name == '__init__' else rel.parts)] = p

    def edges(name: str, p: Path) -> set[str]:
        out = set()
        for n in ast.walk(ast.parse(p.read_text())):
            if isinstance(n, ast.Import):
                out |= {a.name for a in n.names if a.name in mods}
            elif isinstance(n, ast.ImportFrom) and n.module and n.level == 0:
                for a in n.names:
                    full = f'{n.module}.{a.name}'
                    out.add(full if full in mods else n.module)
        return (out & set(mods)) - {name}

    graph = {m: edges(m, p) for m, p in mods.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_two_modules_of_the_package_import_each_other() -> None:
    assert _import_cycles(ROOT) == []


def test_the_cycle_check_finds_a_lazy_import_back(tmp_path: Path) -> None:
    pkg = tmp_path / 'rt_fusion'
    pkg.mkdir()
    (pkg / '__init__.py').write_text('')
    (pkg / 'a.py').write_text('from rt_fusion.b import X\n')
    (pkg / 'b.py').write_text('X = 1\ndef f():\n    from rt_fusion import a\n')
    assert _import_cycles(tmp_path) == [['rt_fusion.a', 'rt_fusion.b']]
