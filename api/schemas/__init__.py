"""Typed request and response bodies of the HTTP API, one module per resource.

Response bodies derive from the read models of :mod:`palimpsest.projections.views` (and
recall's), declared there once; request bodies are declared here.
"""

from __future__ import annotations

from palimpsest.api.schemas._admin import (
    CacheEvicted,
)
from palimpsest.api.schemas._batch import (
    BatchCreate,
    BatchItem,
    BatchPublic,
)
from palimpsest.api.schemas._common import (
    BatchRef,
    Label,
    MediaType,
    Reason,
    RequestBody,
)
from palimpsest.api.schemas._contributions import (
    ContributionAdded,
    ContributionsCreate,
    ContributionsCreated,
)
from palimpsest.api.schemas._decisions import (
    DecisionOutcome,
    DecisionPublic,
)
from palimpsest.api.schemas._edges import (
    EdgeRetract,
)
from palimpsest.api.schemas._erasures import (
    ErasureCreate,
    ErasureReceipt,
    ErasureRemoved,
)
from palimpsest.api.schemas._events import (
    EventPagePublic,
    EventPublic,
)
from palimpsest.api.schemas._forgetting import (
    JudgeItemsPublic,
    OperatorVerdict,
    PassRunCreate,
    PassRunPublic,
    VerdictRecorded,
    VerdictsCreate,
    VerdictsRecorded,
)
from palimpsest.api.schemas._memories import (
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
from palimpsest.api.schemas._observations import (
    Milestone,
    Milestones,
    ObservationCreate,
    ObservationCreated,
    ObservationPublic,
    RetractCreate,
)
from palimpsest.api.schemas._proposals import (
    ProposalApply,
    ProposalPagePublic,
    ProposalPublic,
    ProposalReject,
    ProposedMemoryPublic,
)
from palimpsest.api.schemas._proposers import (
    WithdrawCreate,
)
from palimpsest.api.schemas._recall import (
    RecallCreate,
    RecalledMemory,
    RecallPublic,
    RecallRank,
)
from palimpsest.api.schemas._revision import (
    RevisionStatusPublic,
)
from palimpsest.api.schemas._tenant import (
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
