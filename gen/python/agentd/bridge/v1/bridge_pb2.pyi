from google.protobuf import any_pb2 as _any_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

CONTENT_KIND_AUDIO: ContentKind
CONTENT_KIND_IMAGE: ContentKind
CONTENT_KIND_RESOURCE: ContentKind
CONTENT_KIND_RESOURCE_LINK: ContentKind
CONTENT_KIND_UNSPECIFIED: ContentKind
DESCRIPTOR: _descriptor.FileDescriptor

class AnswerServerRequestRequest(_message.Message):
    __slots__ = ["authorization", "deferred", "elicitation", "error", "id", "sampling", "session_id"]
    AUTHORIZATION_FIELD_NUMBER: _ClassVar[int]
    DEFERRED_FIELD_NUMBER: _ClassVar[int]
    ELICITATION_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    authorization: str
    deferred: Deferred
    elicitation: ElicitationResult
    error: CallError
    id: int
    sampling: SamplingResult
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., id: _Optional[int] = ..., authorization: _Optional[str] = ..., elicitation: _Optional[_Union[ElicitationResult, _Mapping]] = ..., error: _Optional[_Union[CallError, _Mapping]] = ..., deferred: _Optional[_Union[Deferred, _Mapping]] = ..., sampling: _Optional[_Union[SamplingResult, _Mapping]] = ...) -> None: ...

class AnswerServerRequestResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class AuthorizationChallenge(_message.Message):
    __slots__ = ["presented", "status", "www_authenticate"]
    PRESENTED_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    WWW_AUTHENTICATE_FIELD_NUMBER: _ClassVar[int]
    presented: str
    status: int
    www_authenticate: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, status: _Optional[int] = ..., www_authenticate: _Optional[_Iterable[str]] = ..., presented: _Optional[str] = ...) -> None: ...

class CacheEntry(_message.Message):
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

class CacheSettings(_message.Message):
    __slots__ = ["enabled", "max_entries", "ttl"]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    max_entries: int
    ttl: _duration_pb2.Duration
    def __init__(self, enabled: bool = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., max_entries: _Optional[int] = ...) -> None: ...

class CallError(_message.Message):
    __slots__ = ["code", "details", "message"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    code: int
    details: _containers.RepeatedCompositeFieldContainer[_any_pb2.Any]
    message: str
    def __init__(self, code: _Optional[int] = ..., message: _Optional[str] = ..., details: _Optional[_Iterable[_Union[_any_pb2.Any, _Mapping]]] = ...) -> None: ...

class CallToolRequest(_message.Message):
    __slots__ = ["arguments", "input_responses", "request_state", "server_name", "session_id", "tool_name"]
    class InputResponsesEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ElicitationResult
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ElicitationResult, _Mapping]] = ...) -> None: ...
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_STATE_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    input_responses: _containers.MessageMap[str, ElicitationResult]
    request_state: str
    server_name: str
    session_id: str
    tool_name: str
    def __init__(self, session_id: _Optional[str] = ..., server_name: _Optional[str] = ..., tool_name: _Optional[str] = ..., arguments: _Optional[str] = ..., input_responses: _Optional[_Mapping[str, ElicitationResult]] = ..., request_state: _Optional[str] = ...) -> None: ...

class CallToolResponse(_message.Message):
    __slots__ = ["attachments", "input_required", "is_error", "output"]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    INPUT_REQUIRED_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    attachments: _containers.RepeatedCompositeFieldContainer[Content]
    input_required: InputRequired
    is_error: bool
    output: str
    def __init__(self, output: _Optional[str] = ..., is_error: bool = ..., attachments: _Optional[_Iterable[_Union[Content, _Mapping]]] = ..., input_required: _Optional[_Union[InputRequired, _Mapping]] = ...) -> None: ...

class CallToolsOpen(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CallToolsRequest(_message.Message):
    __slots__ = ["call", "cancel", "open"]
    CALL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    OPEN_FIELD_NUMBER: _ClassVar[int]
    call: StreamedToolCall
    cancel: int
    open: CallToolsOpen
    def __init__(self, open: _Optional[_Union[CallToolsOpen, _Mapping]] = ..., call: _Optional[_Union[StreamedToolCall, _Mapping]] = ..., cancel: _Optional[int] = ...) -> None: ...

class CallToolsResponse(_message.Message):
    __slots__ = ["error", "id", "progress", "result"]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    error: CallError
    id: int
    progress: ToolProgress
    result: CallToolResponse
    def __init__(self, id: _Optional[int] = ..., result: _Optional[_Union[CallToolResponse, _Mapping]] = ..., error: _Optional[_Union[CallError, _Mapping]] = ..., progress: _Optional[_Union[ToolProgress, _Mapping]] = ...) -> None: ...

class ClearCacheRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ClearCacheResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ["session_id"]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ConfigureCacheRequest(_message.Message):
    __slots__ = ["enabled", "max_entries", "ttl"]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    MAX_ENTRIES_FIELD_NUMBER: _ClassVar[int]
    TTL_FIELD_NUMBER: _ClassVar[int]
    enabled: bool
    max_entries: int
    ttl: _duration_pb2.Duration
    def __init__(self, enabled: bool = ..., ttl: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., max_entries: _Optional[int] = ...) -> None: ...

class ConfigureCacheResponse(_message.Message):
    __slots__ = ["settings"]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: CacheSettings
    def __init__(self, settings: _Optional[_Union[CacheSettings, _Mapping]] = ...) -> None: ...

class Content(_message.Message):
    __slots__ = ["data", "kind", "mime_type", "name", "uri"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    kind: ContentKind
    mime_type: str
    name: str
    uri: str
    def __init__(self, kind: _Optional[_Union[ContentKind, str]] = ..., mime_type: _Optional[str] = ..., data: _Optional[bytes] = ..., uri: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class Deferred(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class Elicitation(_message.Message):
    __slots__ = ["elicitation_id", "message", "mode", "requested_schema", "url"]
    ELICITATION_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    elicitation_id: str
    message: str
    mode: str
    requested_schema: _struct_pb2.Struct
    url: str
    def __init__(self, mode: _Optional[str] = ..., message: _Optional[str] = ..., requested_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., url: _Optional[str] = ..., elicitation_id: _Optional[str] = ...) -> None: ...

class ElicitationResult(_message.Message):
    __slots__ = ["action", "content"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    action: str
    content: _struct_pb2.Struct
    def __init__(self, action: _Optional[str] = ..., content: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GetCacheStatsRequest(_message.Message):
    __slots__ = ["tenant"]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    tenant: str
    def __init__(self, tenant: _Optional[str] = ...) -> None: ...

class GetCacheStatsResponse(_message.Message):
    __slots__ = ["hits", "misses", "settings", "size"]
    HITS_FIELD_NUMBER: _ClassVar[int]
    MISSES_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    SIZE_FIELD_NUMBER: _ClassVar[int]
    hits: int
    misses: int
    settings: CacheSettings
    size: int
    def __init__(self, size: _Optional[int] = ..., hits: _Optional[int] = ..., misses: _Optional[int] = ..., settings: _Optional[_Union[CacheSettings, _Mapping]] = ...) -> None: ...

class GetPoolStatsRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetPoolStatsResponse(_message.Message):
    __slots__ = ["open_sessions", "pools"]
    OPEN_SESSIONS_FIELD_NUMBER: _ClassVar[int]
    POOLS_FIELD_NUMBER: _ClassVar[int]
    open_sessions: int
    pools: _containers.RepeatedCompositeFieldContainer[PoolStats]
    def __init__(self, pools: _Optional[_Iterable[_Union[PoolStats, _Mapping]]] = ..., open_sessions: _Optional[int] = ...) -> None: ...

class HTTPTarget(_message.Message):
    __slots__ = ["authorization", "headers", "max_reconnection_wait", "oauth", "url"]
    class HeadersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    AUTHORIZATION_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    MAX_RECONNECTION_WAIT_FIELD_NUMBER: _ClassVar[int]
    OAUTH_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    authorization: str
    headers: _containers.ScalarMap[str, str]
    max_reconnection_wait: _duration_pb2.Duration
    oauth: bool
    url: str
    def __init__(self, url: _Optional[str] = ..., authorization: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., max_reconnection_wait: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., oauth: bool = ...) -> None: ...

class InputRequired(_message.Message):
    __slots__ = ["request_state", "requests"]
    class RequestsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Elicitation
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Elicitation, _Mapping]] = ...) -> None: ...
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_STATE_FIELD_NUMBER: _ClassVar[int]
    request_state: str
    requests: _containers.MessageMap[str, Elicitation]
    def __init__(self, requests: _Optional[_Mapping[str, Elicitation]] = ..., request_state: _Optional[str] = ...) -> None: ...

class InvalidateCacheEntriesRequest(_message.Message):
    __slots__ = ["key", "tenant"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    key: str
    tenant: str
    def __init__(self, key: _Optional[str] = ..., tenant: _Optional[str] = ...) -> None: ...

class InvalidateCacheEntriesResponse(_message.Message):
    __slots__ = ["removed"]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: int
    def __init__(self, removed: _Optional[int] = ...) -> None: ...

class InvalidateCacheRequest(_message.Message):
    __slots__ = ["server", "tenant"]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    server: ServerSpec
    tenant: str
    def __init__(self, server: _Optional[_Union[ServerSpec, _Mapping]] = ..., tenant: _Optional[str] = ...) -> None: ...

class InvalidateCacheResponse(_message.Message):
    __slots__ = ["removed"]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: bool
    def __init__(self, removed: bool = ...) -> None: ...

class ListCacheEntriesRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ListCacheEntriesResponse(_message.Message):
    __slots__ = ["entries"]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[CacheEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[CacheEntry, _Mapping]]] = ...) -> None: ...

class ListToolsRequest(_message.Message):
    __slots__ = ["server_names", "session_id"]
    SERVER_NAMES_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    server_names: _containers.RepeatedScalarFieldContainer[str]
    session_id: str
    def __init__(self, session_id: _Optional[str] = ..., server_names: _Optional[_Iterable[str]] = ...) -> None: ...

class ListToolsResponse(_message.Message):
    __slots__ = ["servers"]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    servers: _containers.RepeatedCompositeFieldContainer[ServerTools]
    def __init__(self, servers: _Optional[_Iterable[_Union[ServerTools, _Mapping]]] = ...) -> None: ...

class OpenSessionRequest(_message.Message):
    __slots__ = ["cache", "generation_id", "known_revisions", "list_cached_tools", "servers", "tenant"]
    CACHE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    KNOWN_REVISIONS_FIELD_NUMBER: _ClassVar[int]
    LIST_CACHED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    cache: bool
    generation_id: str
    known_revisions: _containers.RepeatedScalarFieldContainer[int]
    list_cached_tools: bool
    servers: _containers.RepeatedCompositeFieldContainer[ServerSpec]
    tenant: str
    def __init__(self, servers: _Optional[_Iterable[_Union[ServerSpec, _Mapping]]] = ..., cache: bool = ..., tenant: _Optional[str] = ..., generation_id: _Optional[str] = ..., list_cached_tools: bool = ..., known_revisions: _Optional[_Iterable[int]] = ...) -> None: ...

class OpenSessionResponse(_message.Message):
    __slots__ = ["opened", "request", "tools_changed"]
    OPENED_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    TOOLS_CHANGED_FIELD_NUMBER: _ClassVar[int]
    opened: SessionOpened
    request: ServerRequest
    tools_changed: ToolsChanged
    def __init__(self, opened: _Optional[_Union[SessionOpened, _Mapping]] = ..., tools_changed: _Optional[_Union[ToolsChanged, _Mapping]] = ..., request: _Optional[_Union[ServerRequest, _Mapping]] = ...) -> None: ...

class PoolStats(_message.Message):
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
    def __init__(self, server_name: _Optional[str] = ..., key: _Optional[str] = ..., warm: _Optional[int] = ..., busy: _Optional[int] = ..., starting: _Optional[int] = ..., max_processes: _Optional[int] = ..., spawned: _Optional[int] = ..., retired: _Optional[int] = ..., crashed: _Optional[int] = ..., waits: _Optional[int] = ..., shared: bool = ..., tenant: _Optional[str] = ...) -> None: ...

class ResetCacheRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class ResetCacheResponse(_message.Message):
    __slots__ = ["settings"]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: CacheSettings
    def __init__(self, settings: _Optional[_Union[CacheSettings, _Mapping]] = ...) -> None: ...

class SamplingMessage(_message.Message):
    __slots__ = ["role", "text"]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    role: str
    text: str
    def __init__(self, role: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class SamplingRequest(_message.Message):
    __slots__ = ["max_tokens", "messages", "system_prompt"]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    max_tokens: int
    messages: _containers.RepeatedCompositeFieldContainer[SamplingMessage]
    system_prompt: str
    def __init__(self, messages: _Optional[_Iterable[_Union[SamplingMessage, _Mapping]]] = ..., system_prompt: _Optional[str] = ..., max_tokens: _Optional[int] = ...) -> None: ...

class SamplingResult(_message.Message):
    __slots__ = ["model", "stop_reason", "text"]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    model: str
    stop_reason: str
    text: str
    def __init__(self, text: _Optional[str] = ..., model: _Optional[str] = ..., stop_reason: _Optional[str] = ...) -> None: ...

class ServerRequest(_message.Message):
    __slots__ = ["authorization", "call_id", "deferrable", "elicitation", "id", "sampling", "server_name"]
    AUTHORIZATION_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    DEFERRABLE_FIELD_NUMBER: _ClassVar[int]
    ELICITATION_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    authorization: AuthorizationChallenge
    call_id: int
    deferrable: bool
    elicitation: Elicitation
    id: int
    sampling: SamplingRequest
    server_name: str
    def __init__(self, id: _Optional[int] = ..., server_name: _Optional[str] = ..., call_id: _Optional[int] = ..., authorization: _Optional[_Union[AuthorizationChallenge, _Mapping]] = ..., elicitation: _Optional[_Union[Elicitation, _Mapping]] = ..., sampling: _Optional[_Union[SamplingRequest, _Mapping]] = ..., deferrable: bool = ...) -> None: ...

class ServerSpec(_message.Message):
    __slots__ = ["allowed_tools", "http", "name", "read_timeout", "ref", "stdio"]
    ALLOWED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    READ_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    STDIO_FIELD_NUMBER: _ClassVar[int]
    allowed_tools: _containers.RepeatedScalarFieldContainer[str]
    http: HTTPTarget
    name: str
    read_timeout: _duration_pb2.Duration
    ref: str
    stdio: StdioTarget
    def __init__(self, name: _Optional[str] = ..., http: _Optional[_Union[HTTPTarget, _Mapping]] = ..., stdio: _Optional[_Union[StdioTarget, _Mapping]] = ..., ref: _Optional[str] = ..., read_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., allowed_tools: _Optional[_Iterable[str]] = ...) -> None: ...

class ServerTools(_message.Message):
    __slots__ = ["cache_hit", "revision", "server_name", "tools", "unchanged"]
    CACHE_HIT_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    UNCHANGED_FIELD_NUMBER: _ClassVar[int]
    cache_hit: bool
    revision: int
    server_name: str
    tools: _containers.RepeatedCompositeFieldContainer[Tool]
    unchanged: bool
    def __init__(self, server_name: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[Tool, _Mapping]]] = ..., cache_hit: bool = ..., revision: _Optional[int] = ..., unchanged: bool = ...) -> None: ...

class SessionOpened(_message.Message):
    __slots__ = ["resumable", "session_id", "tools"]
    RESUMABLE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    resumable: bool
    session_id: str
    tools: ListToolsResponse
    def __init__(self, session_id: _Optional[str] = ..., resumable: bool = ..., tools: _Optional[_Union[ListToolsResponse, _Mapping]] = ...) -> None: ...

class StdioTarget(_message.Message):
    __slots__ = ["args", "command", "env", "unset_env"]
    class EnvEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ARGS_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    UNSET_ENV_FIELD_NUMBER: _ClassVar[int]
    args: _containers.RepeatedScalarFieldContainer[str]
    command: str
    env: _containers.ScalarMap[str, str]
    unset_env: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, command: _Optional[str] = ..., args: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., unset_env: _Optional[_Iterable[str]] = ...) -> None: ...

class StreamedToolCall(_message.Message):
    __slots__ = ["arguments", "id", "input_responses", "request_state", "server_name", "timeout", "tool_name", "trace_context"]
    class InputResponsesEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ElicitationResult
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ElicitationResult, _Mapping]] = ...) -> None: ...
    class TraceContextEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_STATE_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TRACE_CONTEXT_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    id: int
    input_responses: _containers.MessageMap[str, ElicitationResult]
    request_state: str
    server_name: str
    timeout: _duration_pb2.Duration
    tool_name: str
    trace_context: _containers.ScalarMap[str, str]
    def __init__(self, id: _Optional[int] = ..., server_name: _Optional[str] = ..., tool_name: _Optional[str] = ..., arguments: _Optional[str] = ..., timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., trace_context: _Optional[_Mapping[str, str]] = ..., input_responses: _Optional[_Mapping[str, ElicitationResult]] = ..., request_state: _Optional[str] = ...) -> None: ...

class Tool(_message.Message):
    __slots__ = ["annotations", "description", "input_schema", "name"]
    ANNOTATIONS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    INPUT_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    annotations: ToolAnnotations
    description: str
    input_schema: _struct_pb2.Struct
    name: str
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., input_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., annotations: _Optional[_Union[ToolAnnotations, _Mapping]] = ...) -> None: ...

class ToolAnnotations(_message.Message):
    __slots__ = ["destructive_hint", "idempotent_hint", "open_world_hint", "read_only_hint", "title"]
    DESTRUCTIVE_HINT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENT_HINT_FIELD_NUMBER: _ClassVar[int]
    OPEN_WORLD_HINT_FIELD_NUMBER: _ClassVar[int]
    READ_ONLY_HINT_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    destructive_hint: bool
    idempotent_hint: bool
    open_world_hint: bool
    read_only_hint: bool
    title: str
    def __init__(self, title: _Optional[str] = ..., read_only_hint: bool = ..., destructive_hint: bool = ..., idempotent_hint: bool = ..., open_world_hint: bool = ...) -> None: ...

class ToolProgress(_message.Message):
    __slots__ = ["message", "progress", "total"]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    message: str
    progress: float
    total: float
    def __init__(self, progress: _Optional[float] = ..., total: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...

class ToolsChanged(_message.Message):
    __slots__ = ["server_name"]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    server_name: str
    def __init__(self, server_name: _Optional[str] = ...) -> None: ...

class ContentKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
