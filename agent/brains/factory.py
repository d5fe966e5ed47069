"""Which brain decides and which conversation answers, built from the site's settings.

The composition root (agent/app.py) calls these with itself as the parts; they live here
because what they build, and what each needs, is the brains' business: the brain the
site's or user's `brain:` names (agent/brains/protocol.py: load_brain), and the model
conversation of ask, chat and the wakes (agent/brains/conversation.py). Neither the
model brain nor the conversation loads the model's SDK, or reads the key, before it is
used: `jobsmith status` never imports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from jobsmith.errors import ConfigError

if TYPE_CHECKING:
    from jobsmith.agent.brains.conversation import Conversation
    from jobsmith.agent.brains.protocol import Brain
    from jobsmith.agent.runtime.session.ledger import JobLedger
    from jobsmith.agent.runtime.submission.executor import Executor
    from jobsmith.site_config import LoadedSite


class ConfigDirs(Protocol):
    """Where the user's key file is kept."""

    @property
    def config_dir(self) -> Path: ...


class Told(Protocol):
    """Whoever is told what a conversation did (agent/watcher/news.py: News)."""

    def add(self, kind: str, **fields: object) -> None: ...


class BrainParts(Protocol):
    """What a brain is built from: the site's settings, the environment and the user's
    directories (the key file)."""

    @property
    def site(self) -> LoadedSite: ...
    @property
    def environ(self) -> Mapping[str, str]: ...
    @property
    def paths(self) -> ConfigDirs: ...


class ConversationParts(BrainParts, Protocol):
    """What a conversation also uses: the executor its tools run steps through, the
    ledger (the person's recent jobs) and the news (an ask's held submission)."""

    @property
    def executor(self) -> Executor: ...
    @property
    def ledger(self) -> JobLedger: ...
    @property
    def news(self) -> Told: ...


def brain_for(parts: BrainParts) -> Brain:
    """Who decides about failed jobs: the site's or user's `brain:` (default: rules;
    without a site config, rules too)."""
    from jobsmith.agent.brains.protocol import load_brain
    from jobsmith.agent.brains.rules import RuleBrain

    try:
        spec = parts.site.config.brain
    except ConfigError:
        spec = "rules"
    return load_brain(spec, {"rules": RuleBrain, "claude": lambda: _claude_brain(parts)})


def _claude_brain(parts: BrainParts) -> Brain:
    """The model brain, with the site's `model:` settings; its key is read when it
    first decides, from the environment or the user's key file."""
    # imported here: neither the brain nor the SDK loads unless `brain: claude`
    from jobsmith.agent.brains.claude import ClaudeBrain
    from jobsmith.agent.brains.model_client import KEY_FILE_NAME

    key_file = parts.paths.config_dir / KEY_FILE_NAME
    return ClaudeBrain(parts.site.config.model, environ=parts.environ, key_file=key_file)


def conversation_for(parts: ConversationParts) -> Conversation:
    """The model conversations of ask, chat and the wakes, with the site's `model:`
    settings; the key is read when one starts (agent/brains/conversation.py)."""
    # imported here: neither the conversation nor the SDK loads for other commands
    from jobsmith.agent.brains.conversation import Conversation
    from jobsmith.agent.brains.model_client import KEY_FILE_NAME

    return Conversation(
        settings=parts.site.config.model,
        environ=parts.environ,
        key_file=parts.paths.config_dir / KEY_FILE_NAME,
        executor=parts.executor,
        recent_jobs=parts.ledger.recent_job_ids,
        tell=parts.news.add,
    )
