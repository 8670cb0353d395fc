from agentd.v1 import agent_pb2 as _agent_pb2
from agentd.v1 import message_pb2 as _message_pb2
from agentd.v1 import thread_pb2 as _thread_pb2
from google.api import annotations_pb2 as _annotations_pb2
from google.api import httpbody_pb2 as _httpbody_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

AUTHORIZATION_REASON_FIRST_USE: AuthorizationReason
AUTHORIZATION_REASON_REAUTHORIZE: AuthorizationReason
AUTHORIZATION_REASON_STEP_UP: AuthorizationReason
AUTHORIZATION_REASON_UNSPECIFIED: AuthorizationReason
DESCRIPTOR: _descriptor.FileDescriptor
GENERATION_STATE_CANCELLED: GenerationState
GENERATION_STATE_COMPLETED: GenerationState
GENERATION_STATE_FAILED: GenerationState
GENERATION_STATE_PAUSED: GenerationState
GENERATION_STATE_QUEUED: GenerationState
GENERATION_STATE_RUNNING: GenerationState
GENERATION_STATE_UNSPECIFIED: GenerationState
GENERATION_STATE_WAITING: GenerationState
INPUT_ACTION_ACCEPT: InputAction
INPUT_ACTION_CANCEL: InputAction
INPUT_ACTION_DECLINE: InputAction
INPUT_ACTION_UNSPECIFIED: InputAction
INPUT_MODE_FORM: InputMode
INPUT_MODE_UNSPECIFIED: InputMode
INPUT_MODE_URL: InputMode
PENDING_REQUEST_KIND_APPROVAL: PendingRequestKind
PENDING_REQUEST_KIND_AUTHORIZATION: PendingRequestKind
PENDING_REQUEST_KIND_FUNCTION_CALL: PendingRequestKind
PENDING_REQUEST_KIND_INPUT: PendingRequestKind
PENDING_REQUEST_KIND_UNSPECIFIED: PendingRequestKind
PLACEMENT_BRIDGE: Placement
PLACEMENT_PROVIDER: Placement
PLACEMENT_UNSPECIFIED: Placement
STOP_REASON_CONTENT_FILTER: StopReason
STOP_REASON_END_TURN: StopReason
STOP_REASON_MAX_TOKENS: StopReason
STOP_REASON_STOP_SEQUENCE: StopReason
STOP_REASON_TOOL_USE: StopReason
STOP_REASON_UNSPECIFIED: StopReason
TOOL_ORIGIN_FUNCTION: ToolOrigin
TOOL_ORIGIN_MCP: ToolOrigin
TOOL_ORIGIN_UNSPECIFIED: ToolOrigin
TRANSPORT_CONNECTOR: Transport
TRANSPORT_HTTP: Transport
TRANSPORT_STDIO: Transport
TRANSPORT_UNSPECIFIED: Transport

class ApprovalDecided(_message.Message):
    __slots__ = ["action", "approved", "decided_at", "decided_by", "kind", "reason", "request_id"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    APPROVED_FIELD_NUMBER: _ClassVar[int]
    DECIDED_AT_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    action: InputAction
    approved: bool
    decided_at: _timestamp_pb2.Timestamp
    decided_by: str
    kind: PendingRequestKind
    reason: str
    request_id: str
    def __init__(self, request_id: _Optional[str] = ..., kind: _Optional[_Union[PendingRequestKind, str]] = ..., approved: bool = ..., action: _Optional[_Union[InputAction, str]] = ..., decided_by: _Optional[str] = ..., reason: _Optional[str] = ..., decided_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ApprovalDecision(_message.Message):
    __slots__ = ["approved", "digest", "raise_to", "reason", "request_id"]
    APPROVED_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    RAISE_TO_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    approved: bool
    digest: str
    raise_to: int
    reason: str
    request_id: str
    def __init__(self, request_id: _Optional[str] = ..., approved: bool = ..., digest: _Optional[str] = ..., reason: _Optional[str] = ..., raise_to: _Optional[int] = ...) -> None: ...

class ApprovalRequest(_message.Message):
    __slots__ = ["arguments", "digest", "id", "limit", "prompt", "sampling", "server_name", "tool_call_id", "tool_name"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    DIGEST_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    digest: str
    id: str
    limit: LimitReached
    prompt: str
    sampling: SamplingApproval
    server_name: str
    tool_call_id: str
    tool_name: str
    def __init__(self, id: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., server_name: _Optional[str] = ..., tool_name: _Optional[str] = ..., arguments: _Optional[str] = ..., prompt: _Optional[str] = ..., digest: _Optional[str] = ..., sampling: _Optional[_Union[SamplingApproval, _Mapping]] = ..., limit: _Optional[_Union[LimitReached, _Mapping]] = ...) -> None: ...

class AttachGeneration(_message.Message):
    __slots__ = ["after_sequence", "generation_id"]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    after_sequence: int
    generation_id: str
    def __init__(self, generation_id: _Optional[str] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class AuthorizationRequest(_message.Message):
    __slots__ = ["id", "reason", "scopes", "server_name", "url"]
    ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    id: str
    reason: AuthorizationReason
    scopes: _containers.RepeatedScalarFieldContainer[str]
    server_name: str
    url: str
    def __init__(self, id: _Optional[str] = ..., server_name: _Optional[str] = ..., url: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., reason: _Optional[_Union[AuthorizationReason, str]] = ...) -> None: ...

class AuthorizationResponse(_message.Message):
    __slots__ = ["redirect_url", "request_id"]
    REDIRECT_URL_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    redirect_url: str
    request_id: str
    def __init__(self, request_id: _Optional[str] = ..., redirect_url: _Optional[str] = ...) -> None: ...

class CancelGeneration(_message.Message):
    __slots__ = ["reason"]
    REASON_FIELD_NUMBER: _ClassVar[int]
    reason: str
    def __init__(self, reason: _Optional[str] = ...) -> None: ...

class CancelGenerationRequest(_message.Message):
    __slots__ = ["generation_id", "reason"]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    generation_id: str
    reason: str
    def __init__(self, generation_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class CancelGenerationResponse(_message.Message):
    __slots__ = ["generation"]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    generation: Generation
    def __init__(self, generation: _Optional[_Union[Generation, _Mapping]] = ...) -> None: ...

class ContextTrim(_message.Message):
    __slots__ = ["budget_tokens", "conversation_tokens", "messages_dropped", "over_budget", "results_elided", "sent_tokens"]
    BUDGET_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_DROPPED_FIELD_NUMBER: _ClassVar[int]
    OVER_BUDGET_FIELD_NUMBER: _ClassVar[int]
    RESULTS_ELIDED_FIELD_NUMBER: _ClassVar[int]
    SENT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    budget_tokens: int
    conversation_tokens: int
    messages_dropped: int
    over_budget: bool
    results_elided: int
    sent_tokens: int
    def __init__(self, conversation_tokens: _Optional[int] = ..., sent_tokens: _Optional[int] = ..., budget_tokens: _Optional[int] = ..., results_elided: _Optional[int] = ..., messages_dropped: _Optional[int] = ..., over_budget: bool = ...) -> None: ...

class Cost(_message.Message):
    __slots__ = ["currency", "nanos", "priced_on", "unknown"]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    NANOS_FIELD_NUMBER: _ClassVar[int]
    PRICED_ON_FIELD_NUMBER: _ClassVar[int]
    UNKNOWN_FIELD_NUMBER: _ClassVar[int]
    currency: str
    nanos: int
    priced_on: str
    unknown: bool
    def __init__(self, currency: _Optional[str] = ..., nanos: _Optional[int] = ..., unknown: bool = ..., priced_on: _Optional[str] = ...) -> None: ...

class CreateGenerationRequest(_message.Message):
    __slots__ = ["start"]
    START_FIELD_NUMBER: _ClassVar[int]
    start: StartGeneration
    def __init__(self, start: _Optional[_Union[StartGeneration, _Mapping]] = ...) -> None: ...

class CreateGenerationResponse(_message.Message):
    __slots__ = ["first_sequence", "generation_id", "queued", "thread_id"]
    FIRST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    first_sequence: int
    generation_id: str
    queued: bool
    thread_id: str
    def __init__(self, generation_id: _Optional[str] = ..., first_sequence: _Optional[int] = ..., queued: bool = ..., thread_id: _Optional[str] = ...) -> None: ...

class DecideRequestsRequest(_message.Message):
    __slots__ = ["approval_decisions", "authorization_responses", "generation_id", "input_responses"]
    APPROVAL_DECISIONS_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    approval_decisions: _containers.RepeatedCompositeFieldContainer[ApprovalDecision]
    authorization_responses: _containers.RepeatedCompositeFieldContainer[AuthorizationResponse]
    generation_id: str
    input_responses: _containers.RepeatedCompositeFieldContainer[InputResponse]
    def __init__(self, generation_id: _Optional[str] = ..., approval_decisions: _Optional[_Iterable[_Union[ApprovalDecision, _Mapping]]] = ..., authorization_responses: _Optional[_Iterable[_Union[AuthorizationResponse, _Mapping]]] = ..., input_responses: _Optional[_Iterable[_Union[InputResponse, _Mapping]]] = ...) -> None: ...

class DecideRequestsResponse(_message.Message):
    __slots__ = ["decisions", "generation"]
    DECISIONS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    decisions: _containers.RepeatedCompositeFieldContainer[ApprovalDecided]
    generation: Generation
    def __init__(self, decisions: _Optional[_Iterable[_Union[ApprovalDecided, _Mapping]]] = ..., generation: _Optional[_Union[Generation, _Mapping]] = ...) -> None: ...

class FollowGenerationRequest(_message.Message):
    __slots__ = ["after_sequence", "generation_id"]
    AFTER_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    after_sequence: int
    generation_id: str
    def __init__(self, generation_id: _Optional[str] = ..., after_sequence: _Optional[int] = ...) -> None: ...

class FollowGenerationResponse(_message.Message):
    __slots__ = ["event"]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: GenerateResponse
    def __init__(self, event: _Optional[_Union[GenerateResponse, _Mapping]] = ...) -> None: ...

class FunctionCall(_message.Message):
    __slots__ = ["arguments", "call_id", "name"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    call_id: str
    name: str
    def __init__(self, call_id: _Optional[str] = ..., name: _Optional[str] = ..., arguments: _Optional[str] = ...) -> None: ...

class FunctionResult(_message.Message):
    __slots__ = ["call_id", "is_error", "output"]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    is_error: bool
    output: str
    def __init__(self, call_id: _Optional[str] = ..., output: _Optional[str] = ..., is_error: bool = ...) -> None: ...

class GenerateRequest(_message.Message):
    __slots__ = ["approval_decision", "attach", "authorization_response", "cancel", "function_result", "input_response", "resume", "start"]
    APPROVAL_DECISION_FIELD_NUMBER: _ClassVar[int]
    ATTACH_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_RESULT_FIELD_NUMBER: _ClassVar[int]
    INPUT_RESPONSE_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    START_FIELD_NUMBER: _ClassVar[int]
    approval_decision: ApprovalDecision
    attach: AttachGeneration
    authorization_response: AuthorizationResponse
    cancel: CancelGeneration
    function_result: FunctionResult
    input_response: InputResponse
    resume: ResumeGeneration
    start: StartGeneration
    def __init__(self, start: _Optional[_Union[StartGeneration, _Mapping]] = ..., resume: _Optional[_Union[ResumeGeneration, _Mapping]] = ..., approval_decision: _Optional[_Union[ApprovalDecision, _Mapping]] = ..., function_result: _Optional[_Union[FunctionResult, _Mapping]] = ..., cancel: _Optional[_Union[CancelGeneration, _Mapping]] = ..., attach: _Optional[_Union[AttachGeneration, _Mapping]] = ..., authorization_response: _Optional[_Union[AuthorizationResponse, _Mapping]] = ..., input_response: _Optional[_Union[InputResponse, _Mapping]] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ["approval_decided", "approval_request", "authorization_request", "completed", "function_call", "input_request", "output_invalid", "paused", "provider_tool_call", "queued", "sequence", "started", "text_delta", "tool_call_finished", "tool_call_started", "tool_progress", "turn_withdrawn", "usage", "warning"]
    APPROVAL_DECIDED_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_REQUEST_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_REQUEST_FIELD_NUMBER: _ClassVar[int]
    COMPLETED_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALL_FIELD_NUMBER: _ClassVar[int]
    INPUT_REQUEST_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_INVALID_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    TEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FINISHED_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_STARTED_FIELD_NUMBER: _ClassVar[int]
    TOOL_PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TURN_WITHDRAWN_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    WARNING_FIELD_NUMBER: _ClassVar[int]
    approval_decided: ApprovalDecided
    approval_request: ApprovalRequest
    authorization_request: AuthorizationRequest
    completed: GenerationCompleted
    function_call: FunctionCall
    input_request: InputRequest
    output_invalid: OutputInvalid
    paused: GenerationPaused
    provider_tool_call: _message_pb2.ProviderToolCall
    queued: GenerationQueued
    sequence: int
    started: GenerationStarted
    text_delta: TextDelta
    tool_call_finished: ToolCallFinished
    tool_call_started: ToolCallStarted
    tool_progress: ToolProgress
    turn_withdrawn: TurnWithdrawn
    usage: Usage
    warning: Warning
    def __init__(self, started: _Optional[_Union[GenerationStarted, _Mapping]] = ..., text_delta: _Optional[_Union[TextDelta, _Mapping]] = ..., tool_call_started: _Optional[_Union[ToolCallStarted, _Mapping]] = ..., tool_call_finished: _Optional[_Union[ToolCallFinished, _Mapping]] = ..., approval_request: _Optional[_Union[ApprovalRequest, _Mapping]] = ..., function_call: _Optional[_Union[FunctionCall, _Mapping]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., provider_tool_call: _Optional[_Union[_message_pb2.ProviderToolCall, _Mapping]] = ..., paused: _Optional[_Union[GenerationPaused, _Mapping]] = ..., completed: _Optional[_Union[GenerationCompleted, _Mapping]] = ..., turn_withdrawn: _Optional[_Union[TurnWithdrawn, _Mapping]] = ..., tool_progress: _Optional[_Union[ToolProgress, _Mapping]] = ..., authorization_request: _Optional[_Union[AuthorizationRequest, _Mapping]] = ..., input_request: _Optional[_Union[InputRequest, _Mapping]] = ..., warning: _Optional[_Union[Warning, _Mapping]] = ..., approval_decided: _Optional[_Union[ApprovalDecided, _Mapping]] = ..., queued: _Optional[_Union[GenerationQueued, _Mapping]] = ..., output_invalid: _Optional[_Union[OutputInvalid, _Mapping]] = ..., sequence: _Optional[int] = ...) -> None: ...

class Generation(_message.Message):
    __slots__ = ["approval_requests", "authorization_requests", "created_at", "end_user", "error_code", "error_message", "expires_at", "finished_at", "function_calls", "generation_id", "input_requests", "last_sequence", "limit", "message", "model", "provider", "started_by", "state", "structured", "thread_id", "trace_id", "updated_at", "usage"]
    APPROVAL_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    END_USER_FIELD_NUMBER: _ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_AT_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALLS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    LAST_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    STARTED_BY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    approval_requests: _containers.RepeatedCompositeFieldContainer[ApprovalRequest]
    authorization_requests: _containers.RepeatedCompositeFieldContainer[AuthorizationRequest]
    created_at: _timestamp_pb2.Timestamp
    end_user: str
    error_code: int
    error_message: str
    expires_at: _timestamp_pb2.Timestamp
    finished_at: _timestamp_pb2.Timestamp
    function_calls: _containers.RepeatedCompositeFieldContainer[FunctionCall]
    generation_id: str
    input_requests: _containers.RepeatedCompositeFieldContainer[InputRequest]
    last_sequence: int
    limit: LimitReached
    message: _message_pb2.Message
    model: str
    provider: str
    started_by: str
    state: GenerationState
    structured: _struct_pb2.Value
    thread_id: str
    trace_id: str
    updated_at: _timestamp_pb2.Timestamp
    usage: Usage
    def __init__(self, generation_id: _Optional[str] = ..., state: _Optional[_Union[GenerationState, str]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., finished_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., last_sequence: _Optional[int] = ..., approval_requests: _Optional[_Iterable[_Union[ApprovalRequest, _Mapping]]] = ..., function_calls: _Optional[_Iterable[_Union[FunctionCall, _Mapping]]] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., message: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., error_code: _Optional[int] = ..., error_message: _Optional[str] = ..., authorization_requests: _Optional[_Iterable[_Union[AuthorizationRequest, _Mapping]]] = ..., input_requests: _Optional[_Iterable[_Union[InputRequest, _Mapping]]] = ..., thread_id: _Optional[str] = ..., started_by: _Optional[str] = ..., end_user: _Optional[str] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., trace_id: _Optional[str] = ..., limit: _Optional[_Union[LimitReached, _Mapping]] = ..., structured: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class GenerationCompleted(_message.Message):
    __slots__ = ["generation_id", "limit", "message", "messages", "stop_reason", "structured", "tool_calls", "tool_turns", "usage"]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    STRUCTURED_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_TURNS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    generation_id: str
    limit: LimitReached
    message: _message_pb2.Message
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    stop_reason: StopReason
    structured: _struct_pb2.Value
    tool_calls: int
    tool_turns: int
    usage: Usage
    def __init__(self, generation_id: _Optional[str] = ..., message: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., usage: _Optional[_Union[Usage, _Mapping]] = ..., stop_reason: _Optional[_Union[StopReason, str]] = ..., tool_turns: _Optional[int] = ..., limit: _Optional[_Union[LimitReached, _Mapping]] = ..., tool_calls: _Optional[int] = ..., structured: _Optional[_Union[_struct_pb2.Value, _Mapping]] = ...) -> None: ...

class GenerationPaused(_message.Message):
    __slots__ = ["approval_requests", "authorization_requests", "expires_at", "function_calls", "generation_id", "input_requests"]
    APPROVAL_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALLS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    approval_requests: _containers.RepeatedCompositeFieldContainer[ApprovalRequest]
    authorization_requests: _containers.RepeatedCompositeFieldContainer[AuthorizationRequest]
    expires_at: _timestamp_pb2.Timestamp
    function_calls: _containers.RepeatedCompositeFieldContainer[FunctionCall]
    generation_id: str
    input_requests: _containers.RepeatedCompositeFieldContainer[InputRequest]
    def __init__(self, generation_id: _Optional[str] = ..., approval_requests: _Optional[_Iterable[_Union[ApprovalRequest, _Mapping]]] = ..., function_calls: _Optional[_Iterable[_Union[FunctionCall, _Mapping]]] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., authorization_requests: _Optional[_Iterable[_Union[AuthorizationRequest, _Mapping]]] = ..., input_requests: _Optional[_Iterable[_Union[InputRequest, _Mapping]]] = ...) -> None: ...

class GenerationQueued(_message.Message):
    __slots__ = ["behind_generation_id", "generation_id", "thread_id"]
    BEHIND_GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    behind_generation_id: str
    generation_id: str
    thread_id: str
    def __init__(self, generation_id: _Optional[str] = ..., thread_id: _Optional[str] = ..., behind_generation_id: _Optional[str] = ...) -> None: ...

class GenerationStarted(_message.Message):
    __slots__ = ["adopted", "generation_id", "resumed", "servers", "thread_id", "tools", "trace_id"]
    ADOPTED_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    SERVERS_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    adopted: bool
    generation_id: str
    resumed: bool
    servers: _containers.RepeatedCompositeFieldContainer[ServerPlacement]
    thread_id: str
    tools: _containers.RepeatedCompositeFieldContainer[ToolInfo]
    trace_id: str
    def __init__(self, generation_id: _Optional[str] = ..., servers: _Optional[_Iterable[_Union[ServerPlacement, _Mapping]]] = ..., tools: _Optional[_Iterable[_Union[ToolInfo, _Mapping]]] = ..., resumed: bool = ..., adopted: bool = ..., thread_id: _Optional[str] = ..., trace_id: _Optional[str] = ...) -> None: ...

class GetCallerRequest(_message.Message):
    __slots__ = []
    def __init__(self) -> None: ...

class GetCallerResponse(_message.Message):
    __slots__ = ["name", "roles", "tenant"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ROLES_FIELD_NUMBER: _ClassVar[int]
    TENANT_FIELD_NUMBER: _ClassVar[int]
    name: str
    roles: _containers.RepeatedScalarFieldContainer[str]
    tenant: str
    def __init__(self, name: _Optional[str] = ..., tenant: _Optional[str] = ..., roles: _Optional[_Iterable[str]] = ...) -> None: ...

class GetGenerationRequest(_message.Message):
    __slots__ = ["generation_id"]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    generation_id: str
    def __init__(self, generation_id: _Optional[str] = ...) -> None: ...

class GetGenerationResponse(_message.Message):
    __slots__ = ["generation"]
    GENERATION_FIELD_NUMBER: _ClassVar[int]
    generation: Generation
    def __init__(self, generation: _Optional[_Union[Generation, _Mapping]] = ...) -> None: ...

class InputRequest(_message.Message):
    __slots__ = ["elicitation_id", "id", "message", "mode", "requested_schema", "server_name", "tool_call_id", "url"]
    ELICITATION_ID_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_SCHEMA_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    elicitation_id: str
    id: str
    message: str
    mode: InputMode
    requested_schema: _struct_pb2.Struct
    server_name: str
    tool_call_id: str
    url: str
    def __init__(self, id: _Optional[str] = ..., server_name: _Optional[str] = ..., tool_call_id: _Optional[str] = ..., message: _Optional[str] = ..., mode: _Optional[_Union[InputMode, str]] = ..., requested_schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., url: _Optional[str] = ..., elicitation_id: _Optional[str] = ...) -> None: ...

class InputResponse(_message.Message):
    __slots__ = ["action", "content", "request_id"]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    CONTENT_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    action: InputAction
    content: _struct_pb2.Struct
    request_id: str
    def __init__(self, request_id: _Optional[str] = ..., action: _Optional[_Union[InputAction, str]] = ..., content: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class LimitReached(_message.Message):
    __slots__ = ["ceiling", "name", "unit", "used", "value"]
    CEILING_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    UNIT_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    ceiling: int
    name: str
    unit: str
    used: int
    value: int
    def __init__(self, name: _Optional[str] = ..., value: _Optional[int] = ..., used: _Optional[int] = ..., unit: _Optional[str] = ..., ceiling: _Optional[int] = ...) -> None: ...

class ListGenerationsRequest(_message.Message):
    __slots__ = ["created_after", "created_before", "end_user", "model", "page_size", "page_token", "provider", "states", "thread_id"]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    END_USER_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    end_user: str
    model: str
    page_size: int
    page_token: str
    provider: str
    states: _containers.RepeatedScalarFieldContainer[GenerationState]
    thread_id: str
    def __init__(self, states: _Optional[_Iterable[_Union[GenerationState, str]]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., end_user: _Optional[str] = ..., created_after: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., thread_id: _Optional[str] = ...) -> None: ...

class ListGenerationsResponse(_message.Message):
    __slots__ = ["generations", "next_page_token"]
    GENERATIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    generations: _containers.RepeatedCompositeFieldContainer[Generation]
    next_page_token: str
    def __init__(self, generations: _Optional[_Iterable[_Union[Generation, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListPendingRequestsRequest(_message.Message):
    __slots__ = ["end_user", "kinds", "page_size", "page_token", "server_name", "tool_name"]
    END_USER_FIELD_NUMBER: _ClassVar[int]
    KINDS_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    end_user: str
    kinds: _containers.RepeatedScalarFieldContainer[PendingRequestKind]
    page_size: int
    page_token: str
    server_name: str
    tool_name: str
    def __init__(self, kinds: _Optional[_Iterable[_Union[PendingRequestKind, str]]] = ..., server_name: _Optional[str] = ..., tool_name: _Optional[str] = ..., end_user: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListPendingRequestsResponse(_message.Message):
    __slots__ = ["next_page_token", "requests"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    requests: _containers.RepeatedCompositeFieldContainer[PendingRequest]
    def __init__(self, requests: _Optional[_Iterable[_Union[PendingRequest, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class OutputInvalid(_message.Message):
    __slots__ = ["errors", "repair", "turn"]
    ERRORS_FIELD_NUMBER: _ClassVar[int]
    REPAIR_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    errors: _containers.RepeatedScalarFieldContainer[str]
    repair: bool
    turn: int
    def __init__(self, turn: _Optional[int] = ..., errors: _Optional[_Iterable[str]] = ..., repair: bool = ...) -> None: ...

class OutputPreview(_message.Message):
    __slots__ = ["final_answer", "native_with_tools", "native_without_tools"]
    FINAL_ANSWER_FIELD_NUMBER: _ClassVar[int]
    NATIVE_WITHOUT_TOOLS_FIELD_NUMBER: _ClassVar[int]
    NATIVE_WITH_TOOLS_FIELD_NUMBER: _ClassVar[int]
    final_answer: _agent_pb2.FunctionTool
    native_with_tools: bool
    native_without_tools: bool
    def __init__(self, native_with_tools: bool = ..., native_without_tools: bool = ..., final_answer: _Optional[_Union[_agent_pb2.FunctionTool, _Mapping]] = ...) -> None: ...

class PendingRequest(_message.Message):
    __slots__ = ["approval", "authorization", "end_user", "expires_at", "function_call", "generation_id", "input", "kind", "model", "provider", "requested_at", "started_by", "state"]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_FIELD_NUMBER: _ClassVar[int]
    END_USER_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALL_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    REQUESTED_AT_FIELD_NUMBER: _ClassVar[int]
    STARTED_BY_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    approval: ApprovalRequest
    authorization: AuthorizationRequest
    end_user: str
    expires_at: _timestamp_pb2.Timestamp
    function_call: FunctionCall
    generation_id: str
    input: InputRequest
    kind: PendingRequestKind
    model: str
    provider: str
    requested_at: _timestamp_pb2.Timestamp
    started_by: str
    state: GenerationState
    def __init__(self, generation_id: _Optional[str] = ..., kind: _Optional[_Union[PendingRequestKind, str]] = ..., approval: _Optional[_Union[ApprovalRequest, _Mapping]] = ..., authorization: _Optional[_Union[AuthorizationRequest, _Mapping]] = ..., input: _Optional[_Union[InputRequest, _Mapping]] = ..., function_call: _Optional[_Union[FunctionCall, _Mapping]] = ..., state: _Optional[_Union[GenerationState, str]] = ..., requested_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., end_user: _Optional[str] = ..., started_by: _Optional[str] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ...) -> None: ...

class PreviewRequest(_message.Message):
    __slots__ = ["agent", "messages"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    agent: _agent_pb2.Agent
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    def __init__(self, agent: _Optional[_Union[_agent_pb2.Agent, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ...) -> None: ...

class PreviewResponse(_message.Message):
    __slots__ = ["instructions", "limits", "max_tool_turns", "messages", "model", "output", "provider", "provider_options", "provider_servers", "tools"]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOOL_TURNS_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_SERVERS_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    instructions: str
    limits: _agent_pb2.GenerationLimits
    max_tool_turns: int
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    model: str
    output: OutputPreview
    provider: str
    provider_options: _struct_pb2.Struct
    provider_servers: _containers.RepeatedCompositeFieldContainer[ServerPlacement]
    tools: _containers.RepeatedCompositeFieldContainer[_agent_pb2.FunctionTool]
    def __init__(self, provider: _Optional[str] = ..., model: _Optional[str] = ..., instructions: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[_agent_pb2.FunctionTool, _Mapping]]] = ..., provider_servers: _Optional[_Iterable[_Union[ServerPlacement, _Mapping]]] = ..., messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., provider_options: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., max_tool_turns: _Optional[int] = ..., limits: _Optional[_Union[_agent_pb2.GenerationLimits, _Mapping]] = ..., output: _Optional[_Union[OutputPreview, _Mapping]] = ...) -> None: ...

class ResumeGeneration(_message.Message):
    __slots__ = ["agent", "answer_timeout", "approval_decisions", "authorization_responses", "function_results", "generation_id", "input_responses"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ANSWER_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_DECISIONS_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_RESULTS_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    INPUT_RESPONSES_FIELD_NUMBER: _ClassVar[int]
    agent: _agent_pb2.Agent
    answer_timeout: _duration_pb2.Duration
    approval_decisions: _containers.RepeatedCompositeFieldContainer[ApprovalDecision]
    authorization_responses: _containers.RepeatedCompositeFieldContainer[AuthorizationResponse]
    function_results: _containers.RepeatedCompositeFieldContainer[FunctionResult]
    generation_id: str
    input_responses: _containers.RepeatedCompositeFieldContainer[InputResponse]
    def __init__(self, generation_id: _Optional[str] = ..., agent: _Optional[_Union[_agent_pb2.Agent, _Mapping]] = ..., approval_decisions: _Optional[_Iterable[_Union[ApprovalDecision, _Mapping]]] = ..., function_results: _Optional[_Iterable[_Union[FunctionResult, _Mapping]]] = ..., answer_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., authorization_responses: _Optional[_Iterable[_Union[AuthorizationResponse, _Mapping]]] = ..., input_responses: _Optional[_Iterable[_Union[InputResponse, _Mapping]]] = ...) -> None: ...

class SamplingApproval(_message.Message):
    __slots__ = ["max_tokens_granted", "max_tokens_requested", "messages", "server_name", "system_prompt"]
    MAX_TOKENS_GRANTED_FIELD_NUMBER: _ClassVar[int]
    MAX_TOKENS_REQUESTED_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    SYSTEM_PROMPT_FIELD_NUMBER: _ClassVar[int]
    max_tokens_granted: int
    max_tokens_requested: int
    messages: _containers.RepeatedCompositeFieldContainer[SamplingMessage]
    server_name: str
    system_prompt: str
    def __init__(self, server_name: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[SamplingMessage, _Mapping]]] = ..., system_prompt: _Optional[str] = ..., max_tokens_requested: _Optional[int] = ..., max_tokens_granted: _Optional[int] = ...) -> None: ...

class SamplingMessage(_message.Message):
    __slots__ = ["role", "text"]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    role: str
    text: str
    def __init__(self, role: _Optional[str] = ..., text: _Optional[str] = ...) -> None: ...

class ServerPlacement(_message.Message):
    __slots__ = ["name", "placement", "transport"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PLACEMENT_FIELD_NUMBER: _ClassVar[int]
    TRANSPORT_FIELD_NUMBER: _ClassVar[int]
    name: str
    placement: Placement
    transport: Transport
    def __init__(self, name: _Optional[str] = ..., placement: _Optional[_Union[Placement, str]] = ..., transport: _Optional[_Union[Transport, str]] = ...) -> None: ...

class StartGeneration(_message.Message):
    __slots__ = ["agent", "answer_timeout", "detach", "end_user", "messages", "multitask", "on_failure", "previous_generation_id", "thread_id"]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    ANSWER_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    DETACH_FIELD_NUMBER: _ClassVar[int]
    END_USER_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MULTITASK_FIELD_NUMBER: _ClassVar[int]
    ON_FAILURE_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    agent: _agent_pb2.Agent
    answer_timeout: _duration_pb2.Duration
    detach: bool
    end_user: str
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    multitask: _thread_pb2.Multitask
    on_failure: _thread_pb2.OnFailure
    previous_generation_id: str
    thread_id: str
    def __init__(self, agent: _Optional[_Union[_agent_pb2.Agent, _Mapping]] = ..., messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., answer_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., detach: bool = ..., end_user: _Optional[str] = ..., thread_id: _Optional[str] = ..., previous_generation_id: _Optional[str] = ..., multitask: _Optional[_Union[_thread_pb2.Multitask, str]] = ..., on_failure: _Optional[_Union[_thread_pb2.OnFailure, str]] = ...) -> None: ...

class StreamGenerationEventsRequest(_message.Message):
    __slots__ = ["after", "generation_id"]
    AFTER_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    after: int
    generation_id: str
    def __init__(self, generation_id: _Optional[str] = ..., after: _Optional[int] = ...) -> None: ...

class StreamGenerationEventsResponse(_message.Message):
    __slots__ = ["chunk"]
    CHUNK_FIELD_NUMBER: _ClassVar[int]
    chunk: _httpbody_pb2.HttpBody
    def __init__(self, chunk: _Optional[_Union[_httpbody_pb2.HttpBody, _Mapping]] = ...) -> None: ...

class TextDelta(_message.Message):
    __slots__ = ["text"]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    text: str
    def __init__(self, text: _Optional[str] = ...) -> None: ...

class ToolCallFinished(_message.Message):
    __slots__ = ["call_id", "duration", "is_error", "origin", "output", "server_name", "tool_name", "turn"]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    DURATION_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    duration: _duration_pb2.Duration
    is_error: bool
    origin: ToolOrigin
    output: str
    server_name: str
    tool_name: str
    turn: int
    def __init__(self, call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., server_name: _Optional[str] = ..., origin: _Optional[_Union[ToolOrigin, str]] = ..., duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., is_error: bool = ..., output: _Optional[str] = ..., turn: _Optional[int] = ...) -> None: ...

class ToolCallStarted(_message.Message):
    __slots__ = ["arguments", "call_id", "origin", "server_name", "tool_name", "turn"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    call_id: str
    origin: ToolOrigin
    server_name: str
    tool_name: str
    turn: int
    def __init__(self, call_id: _Optional[str] = ..., tool_name: _Optional[str] = ..., server_name: _Optional[str] = ..., origin: _Optional[_Union[ToolOrigin, str]] = ..., arguments: _Optional[str] = ..., turn: _Optional[int] = ...) -> None: ...

class ToolInfo(_message.Message):
    __slots__ = ["name", "origin", "server_name", "server_tool_name"]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    SERVER_TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    origin: ToolOrigin
    server_name: str
    server_tool_name: str
    def __init__(self, name: _Optional[str] = ..., origin: _Optional[_Union[ToolOrigin, str]] = ..., server_name: _Optional[str] = ..., server_tool_name: _Optional[str] = ...) -> None: ...

class ToolProgress(_message.Message):
    __slots__ = ["call_id", "message", "progress", "total"]
    CALL_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_FIELD_NUMBER: _ClassVar[int]
    call_id: str
    message: str
    progress: float
    total: float
    def __init__(self, call_id: _Optional[str] = ..., progress: _Optional[float] = ..., total: _Optional[float] = ..., message: _Optional[str] = ...) -> None: ...

class TurnWithdrawn(_message.Message):
    __slots__ = ["from_sequence", "reason", "turn"]
    FROM_SEQUENCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    from_sequence: int
    reason: str
    turn: int
    def __init__(self, turn: _Optional[int] = ..., from_sequence: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class Usage(_message.Message):
    __slots__ = ["cache_read_input_tokens", "cache_write_input_tokens", "context", "cost", "input_tokens", "output_tokens", "repeated", "stop_reason", "tool_schema_bytes", "turn"]
    CACHE_READ_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CACHE_WRITE_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    REPEATED_FIELD_NUMBER: _ClassVar[int]
    STOP_REASON_FIELD_NUMBER: _ClassVar[int]
    TOOL_SCHEMA_BYTES_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    cache_read_input_tokens: int
    cache_write_input_tokens: int
    context: ContextTrim
    cost: Cost
    input_tokens: int
    output_tokens: int
    repeated: bool
    stop_reason: StopReason
    tool_schema_bytes: int
    turn: int
    def __init__(self, input_tokens: _Optional[int] = ..., output_tokens: _Optional[int] = ..., cache_read_input_tokens: _Optional[int] = ..., cache_write_input_tokens: _Optional[int] = ..., tool_schema_bytes: _Optional[int] = ..., turn: _Optional[int] = ..., repeated: bool = ..., stop_reason: _Optional[_Union[StopReason, str]] = ..., context: _Optional[_Union[ContextTrim, _Mapping]] = ..., cost: _Optional[_Union[Cost, _Mapping]] = ...) -> None: ...

class Warning(_message.Message):
    __slots__ = ["code", "message", "server_name", "tool_name"]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    code: str
    message: str
    server_name: str
    tool_name: str
    def __init__(self, code: _Optional[str] = ..., message: _Optional[str] = ..., server_name: _Optional[str] = ..., tool_name: _Optional[str] = ...) -> None: ...

class Placement(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class Transport(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ToolOrigin(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class AuthorizationReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class InputMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class InputAction(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class StopReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class GenerationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class PendingRequestKind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
