from agentd.v1 import agent_service_pb2 as _agent_service_pb2
from agentd.v1 import message_pb2 as _message_pb2
from agentd.v1 import thread_pb2 as _thread_pb2
from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class AuthorizationWait(_message.Message):
    __slots__ = ["request_id", "tool_call_id"]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class CallState(_message.Message):
    __slots__ = ["approval", "authorization", "function_call", "input", "logged_result", "result"]
    APPROVAL_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_CALL_FIELD_NUMBER: _ClassVar[int]
    INPUT_FIELD_NUMBER: _ClassVar[int]
    LOGGED_RESULT_FIELD_NUMBER: _ClassVar[int]
    RESULT_FIELD_NUMBER: _ClassVar[int]
    approval: _agent_service_pb2.ApprovalRequest
    authorization: AuthorizationWait
    function_call: _agent_service_pb2.FunctionCall
    input: InputWait
    logged_result: int
    result: _message_pb2.ToolResult
    def __init__(self, result: _Optional[_Union[_message_pb2.ToolResult, _Mapping]] = ..., approval: _Optional[_Union[_agent_service_pb2.ApprovalRequest, _Mapping]] = ..., function_call: _Optional[_Union[_agent_service_pb2.FunctionCall, _Mapping]] = ..., authorization: _Optional[_Union[AuthorizationWait, _Mapping]] = ..., input: _Optional[_Union[InputWait, _Mapping]] = ..., logged_result: _Optional[int] = ...) -> None: ...

class Checkpoint(_message.Message):
    __slots__ = ["added", "agent", "agent_sealed", "answered", "claim", "conversation", "detached", "elapsed", "end_user", "expires_at", "generation_id", "key_id", "messages", "model", "on_failure", "origin_span_id", "origin_trace_id", "output_repairs", "paused_at", "provider", "raised_limits", "resuming", "secrets_withheld", "step_ups", "thread_base", "thread_id", "tool_calls", "tool_turns", "turn", "usage", "version"]
    class RaisedLimitsEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: int
        def __init__(self, key: _Optional[str] = ..., value: _Optional[int] = ...) -> None: ...
    ADDED_FIELD_NUMBER: _ClassVar[int]
    AGENT_FIELD_NUMBER: _ClassVar[int]
    AGENT_SEALED_FIELD_NUMBER: _ClassVar[int]
    ANSWERED_FIELD_NUMBER: _ClassVar[int]
    CLAIM_FIELD_NUMBER: _ClassVar[int]
    CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    DETACHED_FIELD_NUMBER: _ClassVar[int]
    ELAPSED_FIELD_NUMBER: _ClassVar[int]
    END_USER_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    ON_FAILURE_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_SPAN_ID_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_TRACE_ID_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_REPAIRS_FIELD_NUMBER: _ClassVar[int]
    PAUSED_AT_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    RAISED_LIMITS_FIELD_NUMBER: _ClassVar[int]
    RESUMING_FIELD_NUMBER: _ClassVar[int]
    SECRETS_WITHHELD_FIELD_NUMBER: _ClassVar[int]
    STEP_UPS_FIELD_NUMBER: _ClassVar[int]
    THREAD_BASE_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_TURNS_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    added: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    agent: bytes
    agent_sealed: bool
    answered: _containers.RepeatedScalarFieldContainer[str]
    claim: Claim
    conversation: Conversation
    detached: bool
    elapsed: _duration_pb2.Duration
    end_user: str
    expires_at: _timestamp_pb2.Timestamp
    generation_id: str
    key_id: str
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    model: str
    on_failure: _thread_pb2.OnFailure
    origin_span_id: bytes
    origin_trace_id: bytes
    output_repairs: int
    paused_at: _timestamp_pb2.Timestamp
    provider: str
    raised_limits: _containers.ScalarMap[str, int]
    resuming: bool
    secrets_withheld: bool
    step_ups: _containers.RepeatedCompositeFieldContainer[StepUp]
    thread_base: int
    thread_id: str
    tool_calls: int
    tool_turns: int
    turn: PausedTurn
    usage: _agent_service_pb2.Usage
    version: int
    def __init__(self, version: _Optional[int] = ..., generation_id: _Optional[str] = ..., provider: _Optional[str] = ..., model: _Optional[str] = ..., messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., added: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., usage: _Optional[_Union[_agent_service_pb2.Usage, _Mapping]] = ..., tool_turns: _Optional[int] = ..., turn: _Optional[_Union[PausedTurn, _Mapping]] = ..., answered: _Optional[_Iterable[str]] = ..., paused_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., claim: _Optional[_Union[Claim, _Mapping]] = ..., step_ups: _Optional[_Iterable[_Union[StepUp, _Mapping]]] = ..., agent: _Optional[bytes] = ..., agent_sealed: bool = ..., secrets_withheld: bool = ..., key_id: _Optional[str] = ..., detached: bool = ..., resuming: bool = ..., origin_trace_id: _Optional[bytes] = ..., origin_span_id: _Optional[bytes] = ..., end_user: _Optional[str] = ..., conversation: _Optional[_Union[Conversation, _Mapping]] = ..., on_failure: _Optional[_Union[_thread_pb2.OnFailure, str]] = ..., thread_id: _Optional[str] = ..., thread_base: _Optional[int] = ..., tool_calls: _Optional[int] = ..., elapsed: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., raised_limits: _Optional[_Mapping[str, int]] = ..., output_repairs: _Optional[int] = ...) -> None: ...

class Claim(_message.Message):
    __slots__ = ["answered_inputs", "approval_decisions", "authorized", "claimed_at", "function_results", "may_have_run", "progressed"]
    ANSWERED_INPUTS_FIELD_NUMBER: _ClassVar[int]
    APPROVAL_DECISIONS_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZED_FIELD_NUMBER: _ClassVar[int]
    CLAIMED_AT_FIELD_NUMBER: _ClassVar[int]
    FUNCTION_RESULTS_FIELD_NUMBER: _ClassVar[int]
    MAY_HAVE_RUN_FIELD_NUMBER: _ClassVar[int]
    PROGRESSED_FIELD_NUMBER: _ClassVar[int]
    answered_inputs: _containers.RepeatedScalarFieldContainer[str]
    approval_decisions: _containers.RepeatedCompositeFieldContainer[_agent_service_pb2.ApprovalDecision]
    authorized: _containers.RepeatedScalarFieldContainer[str]
    claimed_at: _timestamp_pb2.Timestamp
    function_results: _containers.RepeatedCompositeFieldContainer[_agent_service_pb2.FunctionResult]
    may_have_run: _containers.RepeatedScalarFieldContainer[str]
    progressed: bool
    def __init__(self, approval_decisions: _Optional[_Iterable[_Union[_agent_service_pb2.ApprovalDecision, _Mapping]]] = ..., function_results: _Optional[_Iterable[_Union[_agent_service_pb2.FunctionResult, _Mapping]]] = ..., claimed_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., may_have_run: _Optional[_Iterable[str]] = ..., progressed: bool = ..., authorized: _Optional[_Iterable[str]] = ..., answered_inputs: _Optional[_Iterable[str]] = ...) -> None: ...

class Conversation(_message.Message):
    __slots__ = ["added_from", "count"]
    ADDED_FROM_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    added_from: int
    count: int
    def __init__(self, count: _Optional[int] = ..., added_from: _Optional[int] = ...) -> None: ...

class InputWait(_message.Message):
    __slots__ = ["inputs", "request_state", "tool_call_id"]
    INPUTS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_STATE_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    inputs: _containers.RepeatedCompositeFieldContainer[PendingInput]
    request_state: str
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., inputs: _Optional[_Iterable[_Union[PendingInput, _Mapping]]] = ..., request_state: _Optional[str] = ...) -> None: ...

class Item(_message.Message):
    __slots__ = ["logged", "message"]
    LOGGED_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    logged: _containers.RepeatedCompositeFieldContainer[LoggedPart]
    message: _message_pb2.Message
    def __init__(self, message: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., logged: _Optional[_Iterable[_Union[LoggedPart, _Mapping]]] = ...) -> None: ...

class LoggedPart(_message.Message):
    __slots__ = ["first", "last", "part"]
    FIRST_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    PART_FIELD_NUMBER: _ClassVar[int]
    first: int
    last: int
    part: int
    def __init__(self, part: _Optional[int] = ..., first: _Optional[int] = ..., last: _Optional[int] = ...) -> None: ...

class PausedTurn(_message.Message):
    __slots__ = ["authorizations", "calls", "calls_in_conversation", "limit", "started", "states", "turn"]
    AUTHORIZATIONS_FIELD_NUMBER: _ClassVar[int]
    CALLS_FIELD_NUMBER: _ClassVar[int]
    CALLS_IN_CONVERSATION_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    STATES_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    authorizations: _containers.RepeatedCompositeFieldContainer[PendingAuthorization]
    calls: _containers.RepeatedCompositeFieldContainer[_message_pb2.ToolCall]
    calls_in_conversation: bool
    limit: _agent_service_pb2.ApprovalRequest
    started: _containers.RepeatedScalarFieldContainer[str]
    states: _containers.RepeatedCompositeFieldContainer[CallState]
    turn: int
    def __init__(self, turn: _Optional[int] = ..., calls: _Optional[_Iterable[_Union[_message_pb2.ToolCall, _Mapping]]] = ..., states: _Optional[_Iterable[_Union[CallState, _Mapping]]] = ..., started: _Optional[_Iterable[str]] = ..., authorizations: _Optional[_Iterable[_Union[PendingAuthorization, _Mapping]]] = ..., calls_in_conversation: bool = ..., limit: _Optional[_Union[_agent_service_pb2.ApprovalRequest, _Mapping]] = ...) -> None: ...

class PendingAuthorization(_message.Message):
    __slots__ = ["key_id", "request_id", "sealed", "server_name"]
    KEY_ID_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    SEALED_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    key_id: str
    request_id: str
    sealed: bytes
    server_name: str
    def __init__(self, request_id: _Optional[str] = ..., server_name: _Optional[str] = ..., sealed: _Optional[bytes] = ..., key_id: _Optional[str] = ...) -> None: ...

class PendingInput(_message.Message):
    __slots__ = ["key", "request"]
    KEY_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FIELD_NUMBER: _ClassVar[int]
    key: str
    request: _agent_service_pb2.InputRequest
    def __init__(self, request: _Optional[_Union[_agent_service_pb2.InputRequest, _Mapping]] = ..., key: _Optional[str] = ...) -> None: ...

class StepUp(_message.Message):
    __slots__ = ["scopes", "server_name"]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    scopes: _containers.RepeatedScalarFieldContainer[str]
    server_name: str
    def __init__(self, server_name: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ...) -> None: ...
