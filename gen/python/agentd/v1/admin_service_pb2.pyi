from agentd.v1 import agent_pb2 as _agent_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

BUDGET_ACTION_FAIL: BudgetAction
BUDGET_ACTION_PAUSE: BudgetAction
BUDGET_ACTION_UNSPECIFIED: BudgetAction
BUDGET_PERIOD_DAY: BudgetPeriod
BUDGET_PERIOD_MONTH: BudgetPeriod
BUDGET_PERIOD_ROLLING: BudgetPeriod
BUDGET_PERIOD_UNSPECIFIED: BudgetPeriod
BUDGET_SCOPE_API_KEY: BudgetScope
BUDGET_SCOPE_END_USER: BudgetScope
BUDGET_SCOPE_TENANT: BudgetScope
BUDGET_SCOPE_UNSPECIFIED: BudgetScope
DESCRIPTOR: _descriptor.FileDescriptor

class Budget(_message.Message):
    __slots__ = ["action", "from_config", "max_cost", "max_tokens", "name", "period", "rolling_hours", "scope", "subject", "tenant", "time_zone", "warn_percent"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    FROM_CONFIG_FIELD_NUMBER: _ClassVar[int]
    MAX_COST_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PERIOD_FIELD_NUMBER: _ClassVar[int]
    ROLLING_HOURS_FIELD_NUMBER: _ClassVar[int]
    SCOPE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TIME_ZONE_FIELD_NUMBER: _ClassVar[int]
    WARN_PERCENT_FIELD_NUMBER: _ClassVar[int]
    action: BudgetAction
    from_config: bool
    max_cost: _agent_pb2.Money
    max_tokens: int
    name: str
    period: BudgetPeriod
    rolling_hours: int
    scope: BudgetScope
    subject: str
    tenant: str
    time_zone: str
    warn_percent: int
    def __init__(self, name: _Optional[str] = ..., tenant: _Optional[str] = ..., scope: _Optional[_Union[BudgetScope, str]] = ..., subject: _Optional[str] = ..., period: _Optional[_Union[BudgetPeriod, str]] = ..., rolling_hours: _Optional[int] = ..., time_zone: _Optional[str] = ..., max_tokens: _Optional[int] = ..., max_cost: _Optional[_Union[_agent_pb2.Money, _Mapping]] = ..., warn_percent: _Optional[int] = ..., action: _Optional[_Union[BudgetAction, str]] = ..., from_config: bool = ...) -> None: ...

class BudgetSpend(_message.Message):
    __slots__ = ["cost", "period_end", "period_start", "reserved_cost", "reserved_tokens", "subject", "tokens"]
    COST_FIELD_NUMBER: _ClassVar[int]
    PERIOD_END_FIELD_NUMBER: _ClassVar[int]
    PERIOD_START_FIELD_NUMBER: _ClassVar[int]
    RESERVED_COST_FIELD_NUMBER: _ClassVar[int]
    RESERVED_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    cost: _agent_pb2.Money
    period_end: _timestamp_pb2.Timestamp
    period_start: _timestamp_pb2.Timestamp
    reserved_cost: _agent_pb2.Money
    reserved_tokens: int
    subject: str
    tokens: int
    def __init__(self, subject: _Optional[str] = ..., period_start: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., period_end: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., tokens: _Optional[int] = ..., cost: _Optional[_Union[_agent_pb2.Money, _Mapping]] = ..., reserved_tokens: _Optional[int] = ..., reserved_cost: _Optional[_Union[_agent_pb2.Money, _Mapping]] = ...) -> None: ...

class BudgetStatus(_message.Message):
    __slots__ = ["budget", "spends"]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    SPENDS_FIELD_NUMBER: _ClassVar[int]
    budget: Budget
    spends: _containers.RepeatedCompositeFieldContainer[BudgetSpend]
    def __init__(self, budget: _Optional[_Union[Budget, _Mapping]] = ..., spends: _Optional[_Iterable[_Union[BudgetSpend, _Mapping]]] = ...) -> None: ...

class DeleteBudgetRequest(_message.Message):
    __slots__ = ["name", "tenant"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    name: str
    tenant: str
    def __init__(self, name: _Optional[str] = ..., tenant: _Optional[str] = ...) -> None: ...

class DeleteBudgetResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetUsageRequest(_message.Message):
    __slots__ = ["end", "group_by", "start", "subject", "tenant"]
    END_FIELD_NUMBER: _ClassVar[int]
    GROUP_BY_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    end: _timestamp_pb2.Timestamp
    group_by: BudgetScope
    start: _timestamp_pb2.Timestamp
    subject: str
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., start: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., group_by: _Optional[_Union[BudgetScope, str]] = ..., subject: _Optional[str] = ...) -> None: ...

class GetUsageResponse(_message.Message):
    __slots__ = ["end", "rows", "start"]
    END_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    end: _timestamp_pb2.Timestamp
    rows: _containers.RepeatedCompositeFieldContainer[UsageRow]
    start: _timestamp_pb2.Timestamp
    def __init__(self, start: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., rows: _Optional[_Iterable[_Union[UsageRow, _Mapping]]] = ...) -> None: ...

class InvalidateSchemaCacheRequest(_message.Message):
    __slots__ = ["key", "tenant"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    key: str
    tenant: str
    def __init__(self, key: _Optional[str] = ..., tenant: _Optional[str] = ...) -> None: ...

class InvalidateSchemaCacheResponse(_message.Message):
    __slots__ = ["removed"]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: int
    def __init__(self, removed: _Optional[int] = ...) -> None: ...

class ListBudgetsRequest(_message.Message):
    __slots__ = ["tenant"]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    def __init__(self, tenant: _Optional[str] = ...) -> None: ...

class ListBudgetsResponse(_message.Message):
    __slots__ = ["budgets"]
    BUDGETS_FIELD_NUMBER: _ClassVar[int]
    budgets: _containers.RepeatedCompositeFieldContainer[BudgetStatus]
    def __init__(self, budgets: _Optional[_Iterable[_Union[BudgetStatus, _Mapping]]] = ...) -> None: ...

class ListMCPServersRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListMCPServersResponse(_message.Message):
    __slots__ = ["cache", "open_sessions", "pools", "servers"]
    CACHE_FIELD_NUMBER: _ClassVar[int]
    OPEN_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    cache: SchemaCache
    open_sessions: int
    pools: _containers.RepeatedCompositeFieldContainer[ProcessPool]
    servers: _containers.RepeatedCompositeFieldContainer[RegisteredServer]
    def __init__(self, servers: _Optional[_Iterable[_Union[RegisteredServer, _Mapping]]] = ..., pools: _Optional[_Iterable[_Union[ProcessPool, _Mapping]]] = ..., open_sessions: _Optional[int] = ..., cache: _Optional[_Union[SchemaCache, _Mapping]] = ...) -> None: ...

class ListTenantsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListTenantsResponse(_message.Message):
    __slots__ = ["tenants"]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    tenants: _containers.RepeatedCompositeFieldContainer[TenantOverview]
    def __init__(self, tenants: _Optional[_Iterable[_Union[TenantOverview, _Mapping]]] = ...) -> None: ...

class ProcessPool(_message.Message):
    __slots__ = ["busy", "crashed", "key", "max_processes", "retired", "server_name", "shared", "spawned", "starting", "tenant", "waits", "warm"]
    BUSY_FIELD_NUMBER: _ClassVar[int]
    CRASHED_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    MAX_PROCESSES_FIELD_NUMBER: _ClassVar[int]
    RETIRED_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    SPAWNED_FIELD_NUMBER: _ClassVar[int]
    STARTING_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    WAITS_FIELD_NUMBER: _ClassVar[int]
    WARM_FIELD_NUMBER: _ClassVar[int]
    busy: int
    crashed: int
    key: str
    max_processes: int
    retired: int
    server_name: str
    shared: bool
    spawned: int
    starting: int
    tenant: str
    waits: int
    warm: int
    def __init__(self, server_name: _Optional[str] = ..., key: _Optional[str] = ..., tenant: _Optional[str] = ..., warm: _Optional[int] = ..., busy: _Optional[int] = ..., starting: _Optional[int] = ..., max_processes: _Optional[int] = ..., spawned: _Optional[int] = ..., retired: _Optional[int] = ..., crashed: _Optional[int] = ..., waits: _Optional[int] = ..., shared: bool = ...) -> None: ...

class RegisteredServer(_message.Message):
    __slots__ = ["name", "per_tenant", "shared", "target", "tenants", "transport"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PER_TENANT_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    TENANTS_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    name: str
    per_tenant: bool
    shared: bool
    target: str
    tenants: _containers.RepeatedScalarFieldContainer[str]
    transport: str
    def __init__(self, name: _Optional[str] = ..., transport: _Optional[str] = ..., target: _Optional[str] = ..., shared: bool = ..., per_tenant: bool = ..., tenants: _Optional[_Iterable[str]] = ...) -> None: ...

class RevokeTokensRequest(_message.Message):
    __slots__ = ["end_user", "server_url", "tenant"]
    END_USER_FIELD_NUMBER: _ClassVar[int]
    SERVER_URL_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    end_user: str
    server_url: str
    tenant: str
    def __init__(self, tenant: _Optional[str] = ..., end_user: _Optional[str] = ..., server_url: _Optional[str] = ...) -> None: ...

class RevokeTokensResponse(_message.Message):
    __slots__ = ["revoked"]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    revoked: int
    def __init__(self, revoked: _Optional[int] = ...) -> None: ...

class SchemaCache(_message.Message):
    __slots__ = ["enabled", "entries", "hits", "max_entries", "misses", "ttl"]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    HITS_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    MISSES_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    entries: _containers.RepeatedCompositeFieldContainer[SchemaCacheEntry]
    hits: int
    max_entries: int
    misses: int
    ttl: _duration_pb2.Duration
    def __init__(self, enabled: bool = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., max_entries: _Optional[int] = ..., hits: _Optional[int] = ..., misses: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[SchemaCacheEntry, _Mapping]]] = ...) -> None: ...

class SchemaCacheEntry(_message.Message):
    __slots__ = ["expires_at", "key", "revision", "server_name", "tenant", "tools", "written_at"]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    WRITTEN_AT_FIELD_NUMBER: _ClassVar[int]
    expires_at: _timestamp_pb2.Timestamp
    key: str
    revision: int
    server_name: str
    tenant: str
    tools: int
    written_at: _timestamp_pb2.Timestamp
    def __init__(self, key: _Optional[str] = ..., server_name: _Optional[str] = ..., tenant: _Optional[str] = ..., revision: _Optional[int] = ..., tools: _Optional[int] = ..., written_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SetBudgetRequest(_message.Message):
    __slots__ = ["budget"]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    budget: Budget
    def __init__(self, budget: _Optional[_Union[Budget, _Mapping]] = ...) -> None: ...

class SetBudgetResponse(_message.Message):
    __slots__ = ["budget"]
    BUDGET_FIELD_NUMBER: _ClassVar[int]
    budget: Budget
    def __init__(self, budget: _Optional[_Union[Budget, _Mapping]] = ...) -> None: ...

class TenantLimits(_message.Message):
    __slots__ = ["generations_per_minute", "max_concurrent_generations", "max_paused_generations", "max_thread_items", "max_threads"]
    GENERATIONS_PER_MINUTE_FIELD_NUMBER: _ClassVar[int]
    MAX_CONCURRENT_GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_PAUSED_GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    MAX_THREADS_FIELD_NUMBER: _ClassVar[int]
    MAX_THREAD_ITEMS_FIELD_NUMBER: _ClassVar[int]
    generations_per_minute: int
    max_concurrent_generations: int
    max_paused_generations: int
    max_thread_items: int
    max_threads: int
    def __init__(self, max_concurrent_generations: _Optional[int] = ..., max_paused_generations: _Optional[int] = ..., generations_per_minute: _Optional[int] = ..., max_threads: _Optional[int] = ..., max_thread_items: _Optional[int] = ...) -> None: ...

class TenantOverview(_message.Message):
    __slots__ = ["limits", "name", "usage"]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    limits: TenantLimits
    name: str
    usage: TenantUsage
    def __init__(self, name: _Optional[str] = ..., limits: _Optional[_Union[TenantLimits, _Mapping]] = ..., usage: _Optional[_Union[TenantUsage, _Mapping]] = ...) -> None: ...

class TenantUsage(_message.Message):
    __slots__ = ["generations_last_minute", "largest_thread_items", "paused_generations", "queued_generations", "running_generations", "threads"]
    GENERATIONS_LAST_MINUTE_FIELD_NUMBER: _ClassVar[int]
    LARGEST_THREAD_ITEMS_FIELD_NUMBER: _ClassVar[int]
    PAUSED_GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    QUEUED_GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    THREADS_FIELD_NUMBER: _ClassVar[int]
    generations_last_minute: int
    largest_thread_items: int
    paused_generations: int
    queued_generations: int
    running_generations: int
    threads: int
    def __init__(self, running_generations: _Optional[int] = ..., paused_generations: _Optional[int] = ..., queued_generations: _Optional[int] = ..., generations_last_minute: _Optional[int] = ..., threads: _Optional[int] = ..., largest_thread_items: _Optional[int] = ...) -> None: ...

class UsageRow(_message.Message):
    __slots__ = ["cache_read_input_tokens", "cache_write_input_tokens", "cost", "input_tokens", "model_calls", "output_tokens", "subject", "unpriced_calls"]
    CACHE_READ_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODEL_CALLS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    UNPRICED_CALLS_FIELD_NUMBER: _ClassVar[int]
    cache_read_input_tokens: int
    cache_write_input_tokens: int
    cost: _containers.RepeatedCompositeFieldContainer[_agent_pb2.Money]
    input_tokens: int
    model_calls: int
    output_tokens: int
    subject: str
    unpriced_calls: int
    def __init__(self, subject: _Optional[str] = ..., model_calls: _Optional[int] = ..., input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cache_read_input_tokens: _Optional[int] = ..., cache_write_input_tokens: _Optional[int] = ..., cost: _Optional[_Iterable[_Union[_agent_pb2.Money, _Mapping]]] = ..., unpriced_calls: _Optional[int] = ...) -> None: ...

class BudgetScope(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class BudgetPeriod(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class BudgetAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
