from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

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
