"""The campaign database (SQLAlchemy 2.0), as the steps use it: ``from traingrid import db`` at
the top of a module, then ``db.transaction(url)``, ``db.RunRepository(session)``.

SQLAlchemy costs ~220 ms to import, twice boto3's own import, and only a step that touches the
database needs it: these names load it on first use (PEP 562's module ``__getattr__``, as the
scientific Python ecosystem's lazy loaders do), so a module's dependency stays at its top while
a cold start that never reaches the database, or has not yet, does not pay for it. The
modules below (``engine``, ``repositories``, ``models``, ``ranking``) import SQLAlchemy at
their tops, as usual.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sqlalchemy.exc import SQLAlchemyError as SQLAlchemyError

    from traingrid.db.engine import transaction as transaction
    from traingrid.db.models import Campaign as Campaign
    from traingrid.db.models import Region as Region
    from traingrid.db.models import RegionPrice as RegionPrice
    from traingrid.db.ranking import ranking as region_ranking
    from traingrid.db.repositories import CampaignRepository as CampaignRepository
    from traingrid.db.repositories import DatasetRepository as DatasetRepository
    from traingrid.db.repositories import RegionRepository as RegionRepository
    from traingrid.db.repositories import RunRepository as RunRepository
    from traingrid.db.repositories import TrainingRunRepository as TrainingRunRepository

# Each name, and the module and name that define it. No name is a submodule's: importing
# ``traingrid.db.ranking`` sets the package's ``ranking`` to that module.
_WHERE = {
    "transaction": ("traingrid.db.engine", "transaction"),
    "Campaign": ("traingrid.db.models", "Campaign"),
    "Region": ("traingrid.db.models", "Region"),
    "RegionPrice": ("traingrid.db.models", "RegionPrice"),
    "region_ranking": ("traingrid.db.ranking", "ranking"),
    "CampaignRepository": ("traingrid.db.repositories", "CampaignRepository"),
    "DatasetRepository": ("traingrid.db.repositories", "DatasetRepository"),
    "RegionRepository": ("traingrid.db.repositories", "RegionRepository"),
    "RunRepository": ("traingrid.db.repositories", "RunRepository"),
    "TrainingRunRepository": ("traingrid.db.repositories", "TrainingRunRepository"),
    "SQLAlchemyError": ("sqlalchemy.exc", "SQLAlchemyError"),
}


if not TYPE_CHECKING:  # to mypy the names are those above: a misspelt one is an error

    def __getattr__(name: str) -> Any:
        if name not in _WHERE:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        module, attribute = _WHERE[name]
        # Python caches the module; the name is looked up again, a dictionary read.
        return getattr(import_module(module), attribute)


__all__ = [  # the names above, spelled out for the linters
    "Campaign", "CampaignRepository", "DatasetRepository", "Region", "RegionPrice",
    "RegionRepository", "RunRepository", "SQLAlchemyError", "TrainingRunRepository",
    "region_ranking", "transaction",
]
