"""What rclpy gained after Humble, and a checker that finds code using it.

Humble's rclpy is the 3.3 series (ros2/rclpy's ``humble`` branch forked from rolling at 3.3.x).
Everything listed here was added on rolling from 3.4.0 on and first released with Iron (5.x),
Jazzy (7.x) or as a Jazzy backport (7.1.x); the entry says the version and pull request, as
``rclpy/CHANGELOG.rst`` of ros2/rclpy records them. The list is conservative: a feature that was
also backported to a late Humble patch release is still treated as missing, because a vehicle on
JetPack 6.2 runs whatever 3.3.x its apt mirror has. Additions after the rclpy of the lock files
(7.1.5 for Jazzy) are left out: code using them fails the tests on Jazzy already.

Only ``rt_fusion/ros/compat.py`` may use these names, behind a check of what the running rclpy
has (the checker skips it, and any import inside ``try: ... except ImportError``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

# Modules (and packages) that Humble's rclpy does not have.
MODULES = {
    'rclpy.event_handler': '4.0.0, ros2/rclpy#1058 (renamed from rclpy.qos_event)',
    'rclpy.experimental': '7.1.4, ros2/rclpy#1435 (EventsExecutor, Jazzy backport)',
    'rclpy.parameter_client': '3.6.0, ros2/rclpy#959',
    'rclpy.wait_for_message': '3.8.0, ros2/rclpy#960',
    'rclpy.service_introspection': '3.10.0, ros2/rclpy#988',
    'rclpy.logging_service': '4.1.0, ros2/rclpy#1102',
    'rclpy.type_hash': '5.0.0, ros2/rclpy#1104',
    'rclpy.type_description_service': '5.0.0, ros2/rclpy#1139',
    'rclpy.parameter_event_handler': '5.3.0, ros2/rclpy#1135',
    'rclpy.clock_type': '7.1.1, ros2/rclpy#1235 (ClockType as an Enum module)',
}

# Attributes and methods of rclpy's classes that Humble's do not have (name -> where, when).
MEMBERS = {
    'get_publisher_count': 'Subscription, 4.0.0, ros2/rclpy#1089',
    'wait_for_node': 'Node, 3.7.0, ros2/rclpy#930',
    'add_pre_set_parameters_callback': 'Node, 3.7.0, ros2/rclpy#966',
    'add_post_set_parameters_callback': 'Node, 3.7.0, ros2/rclpy#966',
    'remove_pre_set_parameters_callback': 'Node, 3.7.0, ros2/rclpy#966',
    'remove_post_set_parameters_callback': 'Node, 3.7.0, ros2/rclpy#966',
    'BEST_AVAILABLE': 'QoS policies, 3.5.0, ros2/rclpy#928',
    'configure_introspection': 'Client/Service, 3.10.0, ros2/rclpy#988',
    'topic_type_hash': 'TopicEndpointInfo, 5.0.0, ros2/rclpy#1104',
    'list_parameters': 'Node, 5.2.0, ros2/rclpy#1124',
    'count_services': 'Node, 5.4.0, ros2/rclpy#1024',
    'count_clients': 'Node, 5.4.0, ros2/rclpy#1024',
    'logger_name': 'Publisher/Subscription/Client/Service, 7.1.5, ros2/rclpy#1475',
}

# Keyword arguments that Humble's signatures reject (callable name -> keyword -> where, when).
KEYWORDS = {
    'PublisherEventCallbacks': {
        'matched': '4.0.0, ros2/rclpy#1083',
        'incompatible_type': '4.0.0, ros2/rclpy#1058',
    },
    'SubscriptionEventCallbacks': {
        'matched': '4.0.0, ros2/rclpy#1083',
        'incompatible_type': '4.0.0, ros2/rclpy#1058',
    },
    'create_timer': {'autostart': '5.0.0, ros2/rclpy#1138'},
    'call': {'timeout_sec': '7.0.0, ros2/rclpy#1188'},
    'Node': {'enable_logger_service': '4.1.0, ros2/rclpy#1102'},
    'LifecycleNode': {'enable_logger_service': '4.1.0, ros2/rclpy#1102'},
}


@dataclass(frozen=True)
class Finding:
    path: str
    line: int
    what: str

    def __str__(self) -> str:
        return f'{self.path}:{self.line}: {self.what}'


def _guarded_by_import_error(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> bool:
    """True inside the body of a ``try`` that catches ImportError (or Exception)."""
    child, parent = node, parents.get(node)
    while parent is not None:
        if isinstance(parent, ast.Try) and child in parent.body:
            for handler in parent.handlers:
                names = []
                if isinstance(handler.type, ast.Name):
                    names = [handler.type.id]
                elif isinstance(handler.type, ast.Tuple):
                    names = [e.id for e in handler.type.elts if isinstance(e, ast.Name)]
                if {'ImportError', 'ModuleNotFoundError', 'Exception'} & set(names):
                    return True
        child, parent = parent, parents.get(parent)
    return False


def _missing_module(name: str) -> str | None:
    for module, when in MODULES.items():
        if name == module or name.startswith(module + '.'):
            return f'{module} ({when})'
    return None


def check_source(text: str, path: str) -> list[Finding]:
    """Every use in ``text`` of an rclpy module, member or keyword Humble's rclpy lacks."""
    tree = ast.parse(text, path)
    parents = {
        child: parent for parent in ast.walk(tree) for child in ast.iter_child_nodes(parent)
    }
    found = []
    for node in ast.walk(tree):
        line = getattr(node, 'lineno', 0)
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            missing = _missing_module(node.module)
            if missing is None and node.module == 'rclpy':
                for alias in node.names:
                    missing = _missing_module(f'rclpy.{alias.name}')
                    if missing:
                        break
            if missing and not _guarded_by_import_error(node, parents):
                found.append(Finding(path, line, f'imports {missing}'))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                missing = _missing_module(alias.name)
                if missing and not _guarded_by_import_error(node, parents):
                    found.append(Finding(path, line, f'imports {missing}'))
        elif isinstance(node, ast.Attribute):
            dotted = ast.unparse(node)
            missing = _missing_module(dotted) if dotted.startswith('rclpy.') else None
            if missing:
                found.append(Finding(path, line, f'uses {missing}'))
            elif node.attr in MEMBERS:
                found.append(Finding(path, line, f'.{node.attr}: {MEMBERS[node.attr]}'))
        elif isinstance(node, ast.Call):
            func = node.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ''
            )
            for keyword in node.keywords:
                when = KEYWORDS.get(name, {}).get(keyword.arg or '')
                if when:
                    found.append(Finding(path, line, f'{name}({keyword.arg}=...): {when}'))
    return sorted(set(found), key=lambda f: (f.line, f.what))


def check_tree(root: Path, folders: tuple[str, ...], skip: tuple[str, ...]) -> list[Finding]:
    """check_source over every ``*.py`` below ``root/<folder>``, except files named in skip."""
    found = []
    for folder in folders:
        for path in sorted((root / folder).rglob('*.py')):
            if path.name in skip or '__pycache__' in path.parts:
                continue
            found += check_source(path.read_text(), str(path.relative_to(root)))
    return found
