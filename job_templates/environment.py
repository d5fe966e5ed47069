"""The Jinja2 environment bodies render in: sandboxed, strict, and escaping-enforcing.

- ImmutableSandboxedEnvironment (a SandboxedEnvironment): a template (user- or
  site-supplied) cannot reach Python internals such as `''.__class__` nor modify the
  lists and dicts it is given. Values are passed as plain data (paths as str) so no
  object with side-effecting methods (Path.unlink) is in reach.
- StrictUndefined: a misspelt variable is an error, not an empty string in a command.
- finalize=require_escaped: every `{{ … }}` must be a number or the output of an
  escaping filter (`q`, `qlist`, `concat_file`), so an unquoted value cannot slip in.
- No loader: bodies cannot include or extend other files.
- trim_blocks/lstrip_blocks: `{% … %}` lines leave no blank lines or indentation behind.
"""

from __future__ import annotations

from pathlib import Path

import jinja2
from jinja2 import StrictUndefined, meta
from jinja2.sandbox import ImmutableSandboxedEnvironment, SandboxedEnvironment

from jobsmith.errors import TemplateError
from jobsmith.job_templates import quoting


def make_environment() -> SandboxedEnvironment:
    """A fresh environment with the escaping filters registered."""
    env = ImmutableSandboxedEnvironment(
        undefined=StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        finalize=quoting.require_escaped,
    )
    env.filters.update(q=quoting.q, qlist=quoting.qlist, concat_file=quoting.concat_file)
    return env


def compile_body(
    env: SandboxedEnvironment, source: str, *, name: str, path: Path
) -> jinja2.Template:
    """Compile a body; TemplateError naming the file and line on a syntax error.

    The file name is given to the compiler so render errors can point at body lines.
    """
    try:
        code = env.compile(source, name=name, filename=str(path))
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"{path}:{exc.lineno}: template syntax error: {exc.message}") from None
    return env.template_class.from_code(env, code, env.make_globals(None))


def body_variables(env: SandboxedEnvironment, source: str, path: Path) -> set[str]:
    """The variables a body reads that are not Jinja globals (they must be parameters)."""
    try:
        ast = env.parse(source, filename=str(path))
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateError(f"{path}:{exc.lineno}: template syntax error: {exc.message}") from None
    return meta.find_undeclared_variables(ast) - set(env.globals)
