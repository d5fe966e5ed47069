"""Job templates: a parameter schema plus a sandboxed Jinja2 body per job type.

Use: `TemplateLibrary([user_dir, site_dir, shipped_library()]).get(name)` to find a
template, then `render_body(template, params, allowed_roots=…)` to validate parameters
and render the job's commands. See README.md beside this file for the file format and
the safety rules. Modules:

- params, resources, arrays, spec: the file format (pydantic models)
- values, paths, tables, validate: checking parameter values
- quoting, environment, render: rendering the body safely
- loader: the search path
"""

from __future__ import annotations

from jobsmith.job_templates.arrays import ArrayPlan
from jobsmith.job_templates.loader import TemplateLibrary, load_template, shipped_library
from jobsmith.job_templates.render import RenderedBody, render_body
from jobsmith.job_templates.resources import Resources
from jobsmith.job_templates.spec import Template
from jobsmith.job_templates.tables import Table

__all__ = [
    "ArrayPlan",
    "RenderedBody",
    "Resources",
    "Table",
    "Template",
    "TemplateLibrary",
    "load_template",
    "render_body",
    "shipped_library",
]
