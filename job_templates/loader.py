"""Finding and loading templates along a search path.

A template `<name>` is the pair `<name>.yaml` + `<name>.sh.j2` in one directory. The
search path is ordered: the first directory holding `<name>.yaml` provides the whole
template, so a user or site directory placed before the shipped library overrides a
shipped template by name. Files are read on first use, never at import.
"""

from __future__ import annotations

import builtins
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError

from jobsmith.errors import TemplateError
from jobsmith.files import read_bounded
from jobsmith.job_templates.environment import body_variables, make_environment
from jobsmith.job_templates.params import IDENTIFIER
from jobsmith.job_templates.spec import Template, TemplateSpec
from jobsmith.job_templates.values import coerce
from jobsmith.site_config.yamlfile import DocumentKind, read_yaml

SPEC_SUFFIX = ".yaml"
BODY_SUFFIX = ".sh.j2"
TEMPLATE_SPEC = DocumentKind("template", "description:, params:, ...", TemplateError)


def shipped_library() -> Path:
    """The directory of the templates shipped with jobsmith (put it last on a search path)."""
    return Path(__file__).resolve().parent / "library"


class TemplateLibrary:
    """Templates found along `search_path`; earlier directories win by template name."""

    def __init__(self, search_path: Sequence[Path]) -> None:
        """Directories that do not exist are skipped (a user may have no template dir)."""
        self.search_path = tuple(Path(directory) for directory in search_path)
        self._loaded: dict[str, Template] = {}

    def names(self) -> builtins.list[str]:
        """Every template name on the search path, sorted."""
        names: set[str] = set()
        for directory in self._directories():
            names.update(_name_of(path) for path in directory.glob(f"*{SPEC_SUFFIX}"))
        return sorted(names)

    def list(self) -> builtins.list[Template]:
        """Every template (the winning one per name), sorted by name; loads them all."""
        return [self.get(name) for name in self.names()]

    def get(self, name: str) -> Template:
        """The template called name; TemplateError listing the available names if unknown."""
        if name not in self._loaded:
            spec_path = self._locate(name)
            if spec_path is None:
                available = ", ".join(self.names()) or "(none)"
                raise TemplateError(f"unknown template {name!r}; available: {available}")
            self._loaded[name] = load_template(spec_path)
        return self._loaded[name]

    def _directories(self) -> builtins.list[Path]:
        for directory in self.search_path:
            if directory.exists() and not directory.is_dir():
                raise TemplateError(f"template search path entry '{directory}' is not a directory")
        return [directory for directory in self.search_path if directory.is_dir()]

    def _locate(self, name: str) -> Path | None:
        if not IDENTIFIER.match(name):  # also keeps '../x' from reaching the file system
            return None
        for directory in self._directories():
            candidate = directory / f"{name}{SPEC_SUFFIX}"
            if candidate.is_file():
                return candidate
        return None


def load_template(spec_path: Path) -> Template:
    """Load and check one template from its YAML file and the body beside it.

    TemplateError names the file and the field (or line) of anything malformed: bad
    YAML, schema violations, defaults or examples of the wrong type, a missing body, a
    body syntax error, or a body variable that is not a parameter.
    """
    name = _name_of(spec_path)
    body_path = spec_path.with_name(f"{name}{BODY_SUFFIX}")
    spec = _read_spec(spec_path)
    body = _read_text(body_path, f"the body of template {name!r}")
    _check_values(spec, spec_path)
    _check_body_variables(spec, body, body_path)
    return Template(name=name, spec=spec, body=body, spec_path=spec_path, body_path=body_path)


def _name_of(spec_path: Path) -> str:
    name = spec_path.name.removesuffix(SPEC_SUFFIX)
    if not IDENTIFIER.match(name):
        raise TemplateError(f"{spec_path}: template names must be snake_case ([a-z][a-z0-9_]*)")
    return name


def _read_text(path: Path, what: str) -> str:
    try:
        return read_bounded(path).decode("utf-8")
    except OSError as exc:
        raise TemplateError(f"{path}: cannot read {what}: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise TemplateError(f"{path}: cannot read {what}: {exc}") from None


def _read_spec(path: Path) -> TemplateSpec:
    data = read_yaml(path, TEMPLATE_SPEC).data
    try:
        return TemplateSpec.model_validate(data)
    except ValidationError as exc:
        raise TemplateError(f"{path}: {_describe(exc)}") from None


def _describe(exc: ValidationError) -> str:
    """Pydantic's errors as `field 'a.b': message`, joined on one line."""
    parts = []
    for error in exc.errors():
        message = str(error["msg"]).removeprefix("Value error, ")
        location = ".".join(str(part) for part in error["loc"])
        parts.append(f"field '{location}': {message}" if location else message)
    return "; ".join(parts)


def _check_values(spec: TemplateSpec, path: Path) -> None:
    """Defaults and examples must be valid values of their parameter's type."""
    for name, param in spec.params.items():
        for field in ("default", "example"):
            value = getattr(param, field)
            if value is None:
                continue
            try:
                coerce(param, value)
            except ValueError as exc:
                raise TemplateError(f"{path}: field 'params.{name}.{field}': {exc}") from None


def _check_body_variables(spec: TemplateSpec, body: str, path: Path) -> None:
    unknown = body_variables(make_environment(), body, path) - set(spec.params)
    if unknown:
        raise TemplateError(
            f"{path}: uses {', '.join(sorted(unknown))}, not parameters of the template; "
            f"parameters: {', '.join(spec.params) or '(none)'}"
        )
