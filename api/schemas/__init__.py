"""Typed request and response bodies of the HTTP API, one module per resource.

Response bodies derive from the read models of :mod:`projections.views` (and
recall's), declared there once; request bodies are declared here.
"""

from __future__ import annotations

from api.schemas.admin import (
    CacheEvicted,
)
from api.schemas.batch import (
    BatchCreate,
    BatchItem,
    BatchPublic,
)
from api.schemas.common import (
    BatchRef,
    Label,
    MediaType,
    Reason,
    RequestBody,
)
from api.schemas.contributions import (
    ContributionAdded,
    ContributionsCreate,
    ContributionsCreated,
)
from api.schemas.decisions import (
    DecisionOutcome,
    DecisionPublic,
)
from api.schemas.edges import (
    EdgeRetract,
)
from api.schemas.erasures import (
    ErasureCreate,
    ErasureReceipt,
    ErasureRemoved,
)
from api.schemas.events import (
    EventPagePublic,
    EventPublic,
)
from api.schemas.forgetting import (
    JudgeItemsPublic,
    OperatorVerdict,
    PassRunCreate,
    PassRunPublic,
    VerdictRecorded,
    VerdictsCreate,
    VerdictsRecorded,
)
from api.schemas.memories import (
    BeliefPublic,
    CandidatePublic,
    CandidatesPublic,
    ContributionPublic,
    EdgeCreate,
    EdgeCreated,
    EdgePublic,
    EvidenceIn,
    EvidencePublic,
    ForgetCreate,
    HistoryVersionPublic,
    LabelChange,
    MemoryCreate,
    MemoryCreated,
    MemoryHistoryPublic,
    MemoryListItem,
    MemoryPagePublic,
    MemoryVersionsPublic,
    RevisionPublic,
    VersionCreate,
    VersionCreated,
    VersionPublic,
)
from api.schemas.observations import (
    Milestone,
    Milestones,
    ObservationCreate,
    ObservationCreated,
    ObservationPublic,
    RetractCreate,
)
from api.schemas.proposals import (
    ProposalApply,
    ProposalPagePublic,
    ProposalPublic,
    ProposalReject,
    ProposedMemoryPublic,
)
from api.schemas.proposers import (
    WithdrawCreate,
)
from api.schemas.recall import (
    RecallCreate,
    RecalledMemory,
    RecallPublic,
    RecallRank,
)
from api.schemas.revision import (
    RevisionStatusPublic,
)
from api.schemas.tenant import (
    JudgmentPublic,
    JudgmentUpdate,
    RetentionPublic,
    RetentionUpdate,
    TenantDeletion,
)

__all__ = [
    "BatchCreate",
    "BatchItem",
    "BatchPublic",
    "BatchRef",
    "BeliefPublic",
    "CacheEvicted",
    "CandidatePublic",
    "CandidatesPublic",
    "ContributionAdded",
    "ContributionPublic",
    "ContributionsCreate",
    "ContributionsCreated",
    "DecisionOutcome",
    "DecisionPublic",
    "EdgeCreate",
    "EdgeCreated",
    "EdgePublic",
    "EdgeRetract",
    "ErasureCreate",
    "ErasureReceipt",
    "ErasureRemoved",
    "EventPagePublic",
    "EventPublic",
    "EvidenceIn",
    "EvidencePublic",
    "ForgetCreate",
    "HistoryVersionPublic",
    "JudgeItemsPublic",
    "JudgmentPublic",
    "JudgmentUpdate",
    "Label",
    "LabelChange",
    "MediaType",
    "MemoryCreate",
    "MemoryCreated",
    "MemoryHistoryPublic",
    "MemoryListItem",
    "MemoryPagePublic",
    "MemoryVersionsPublic",
    "Milestone",
    "Milestones",
    "ObservationCreate",
    "ObservationCreated",
    "ObservationPublic",
    "OperatorVerdict",
    "PassRunCreate",
    "PassRunPublic",
    "ProposalApply",
    "ProposalPagePublic",
    "ProposalPublic",
    "ProposalReject",
    "ProposedMemoryPublic",
    "Reason",
    "RecallCreate",
    "RecallPublic",
    "RecallRank",
    "RecalledMemory",
    "RequestBody",
    "RetentionPublic",
    "RetentionUpdate",
    "RetractCreate",
    "RevisionPublic",
    "RevisionStatusPublic",
    "TenantDeletion",
    "VerdictRecorded",
    "VerdictsCreate",
    "VerdictsRecorded",
    "VersionCreate",
    "VersionCreated",
    "VersionPublic",
    "WithdrawCreate",
]
