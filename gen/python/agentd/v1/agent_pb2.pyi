from google.protobuf import duration_pb2 as _duration_pb2
from google.protobuf import struct_pb2 as _struct_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

APPROVAL_MODE_ALWAYS: ApprovalMode
APPROVAL_MODE_NEVER: ApprovalMode
APPROVAL_MODE_UNSPECIFIED: ApprovalMode
DESCRIPTOR: _descriptor.FileDescriptor
ELICITATION_POLICY_ASK: ElicitationPolicy
ELICITATION_POLICY_DENY: ElicitationPolicy
ELICITATION_POLICY_UNSPECIFIED: ElicitationPolicy
GRANT_TYPE_AUTHORIZATION_CODE: GrantType
GRANT_TYPE_CLIENT_CREDENTIALS: GrantType
GRANT_TYPE_ENTERPRISE_MANAGED: GrantType
GRANT_TYPE_UNSPECIFIED: GrantType
MCP_STRATEGY_AUTO: MCPStrategy
MCP_STRATEGY_CLIENT: MCPStrategy
MCP_STRATEGY_SERVER: MCPStrategy
MCP_STRATEGY_UNSPECIFIED: MCPStrategy
ON_LIMIT_END: OnLimit
ON_LIMIT_FAIL: OnLimit
ON_LIMIT_PAUSE: OnLimit
ON_LIMIT_UNSPECIFIED: OnLimit
SAMPLING_MODE_ALLOW: SamplingMode
SAMPLING_MODE_ASK: SamplingMode
SAMPLING_MODE_DENY: SamplingMode
SAMPLING_MODE_UNSPECIFIED: SamplingMode
TOOL_NAME_CONFLICT_PREFIX: ToolNameConflict
TOOL_NAME_CONFLICT_REFUSE: ToolNameConflict
TOOL_NAME_CONFLICT_UNSPECIFIED: ToolNameConflict

class Agent(_message.Message):
    __slots__ = ["context", "elicitation", "instructions", "limits", "max_tool_turns", "mcp_cache", "mcp_strategy", "mcps", "model", "output", "provider", "provider_options", "requires_approval", "tool_name_conflict", "tools"]
    CONTEXT_FIELD_NUMBER: _ClassVar[int]
    ELICITATION_FIELD_NUMBER: _ClassVar[int]
    INSTRUCTIONS_FIELD_NUMBER: _ClassVar[int]
    LIMITS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOOL_TURNS_FIELD_NUMBER: _ClassVar[int]
    MCPS_FIELD_NUMBER: _ClassVar[int]
    MCP_CACHE_FIELD_NUMBER: _ClassVar[int]
    MCP_STRATEGY_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_OPTIONS_FIELD_NUMBER: _ClassVar[int]
    REQUIRES_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    TOOLS_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_CONFLICT_FIELD_NUMBER: _ClassVar[int]
    context: ContextPolicy
    elicitation: ElicitationPolicy
    instructions: str
    limits: GenerationLimits
    max_tool_turns: int
    mcp_cache: bool
    mcp_strategy: MCPStrategy
    mcps: _containers.RepeatedCompositeFieldContainer[MCPServer]
    model: str
    output: Output
    provider: str
    provider_options: _struct_pb2.Struct
    requires_approval: _containers.RepeatedScalarFieldContainer[str]
    tool_name_conflict: ToolNameConflict
    tools: _containers.RepeatedCompositeFieldContainer[FunctionTool]
    def __init__(self, provider: _Optional[str] = ..., model: _Optional[str] = ..., instructions: _Optional[str] = ..., tools: _Optional[_Iterable[_Union[FunctionTool, _Mapping]]] = ..., mcps: _Optional[_Iterable[_Union[MCPServer, _Mapping]]] = ..., mcp_strategy: _Optional[_Union[MCPStrategy, str]] = ..., requires_approval: _Optional[_Iterable[str]] = ..., mcp_cache: bool = ..., max_tool_turns: _Optional[int] = ..., provider_options: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., tool_name_conflict: _Optional[_Union[ToolNameConflict, str]] = ..., elicitation: _Optional[_Union[ElicitationPolicy, str]] = ..., context: _Optional[_Union[ContextPolicy, _Mapping]] = ..., limits: _Optional[_Union[GenerationLimits, _Mapping]] = ..., output: _Optional[_Union[Output, _Mapping]] = ...) -> None: ...

class ApprovalPolicy(_message.Message):
    __slots__ = ["always", "mode", "never"]
    ALWAYS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    NEVER_FIELD_NUMBER: _ClassVar[int]
    always: ToolNames
    mode: ApprovalMode
    never: ToolNames
    def __init__(self, mode: _Optional[_Union[ApprovalMode, str]] = ..., always: _Optional[_Union[ToolNames, _Mapping]] = ..., never: _Optional[_Union[ToolNames, _Mapping]] = ...) -> None: ...

class ContextPolicy(_message.Message):
    __slots__ = ["keep_first", "keep_tool_results", "max_input_tokens", "reserve_output_tokens"]
    KEEP_FIRST_FIELD_NUMBER: _ClassVar[int]
    KEEP_TOOL_RESULTS_FIELD_NUMBER: _ClassVar[int]
    MAX_INPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    RESERVE_OUTPUT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    keep_first: bool
    keep_tool_results: bool
    max_input_tokens: int
    reserve_output_tokens: int
    def __init__(self, max_input_tokens: _Optional[int] = ..., reserve_output_tokens: _Optional[int] = ..., keep_first: bool = ..., keep_tool_results: bool = ...) -> None: ...

class FunctionTool(_message.Message):
    __slots__ = ["description", "name", "parameters"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMETERS_FIELD_NUMBER: _ClassVar[int]
    description: str
    name: str
    parameters: _struct_pb2.Struct
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., parameters: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ...) -> None: ...

class GenerationLimits(_message.Message):
    __slots__ = ["max_cost", "max_duration", "max_tool_calls", "max_total_tokens", "on_limit"]
    MAX_COST_FIELD_NUMBER: _ClassVar[int]
    MAX_DURATION_FIELD_NUMBER: _ClassVar[int]
    MAX_TOOL_CALLS_FIELD_NUMBER: _ClassVar[int]
    MAX_TOTAL_TOKENS_FIELD_NUMBER: _ClassVar[int]
    ON_LIMIT_FIELD_NUMBER: _ClassVar[int]
    max_cost: Money
    max_duration: _duration_pb2.Duration
    max_tool_calls: int
    max_total_tokens: int
    on_limit: OnLimit
    def __init__(self, max_tool_calls: _Optional[int] = ..., max_total_tokens: _Optional[int] = ..., max_cost: _Optional[_Union[Money, _Mapping]] = ..., max_duration: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., on_limit: _Optional[_Union[OnLimit, str]] = ...) -> None: ...

class IdentityProvider(_message.Message):
    __slots__ = ["client_id", "client_secret", "id_token", "issuer", "token_endpoint"]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SECRET_FIELD_NUMBER: _ClassVar[int]
    ID_TOKEN_FIELD_NUMBER: _ClassVar[int]
    ISSUER_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ENDPOINT_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    client_secret: str
    id_token: str
    issuer: str
    token_endpoint: str
    def __init__(self, issuer: _Optional[str] = ..., token_endpoint: _Optional[str] = ..., client_id: _Optional[str] = ..., client_secret: _Optional[str] = ..., id_token: _Optional[str] = ...) -> None: ...

class MCPServer(_message.Message):
    __slots__ = ["allowed_tools", "args", "authorization", "command", "env", "headers", "max_reconnection_wait", "name", "oauth", "read_timeout", "ref", "require_approval", "sampling", "unset_env", "url"]
    class EnvEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class HeadersEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ALLOWED_TOOLS_FIELD_NUMBER: _ClassVar[int]
    ARGS_FIELD_NUMBER: _ClassVar[int]
    AUTHORIZATION_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    HEADERS_FIELD_NUMBER: _ClassVar[int]
    MAX_RECONNECTION_WAIT_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OAUTH_FIELD_NUMBER: _ClassVar[int]
    READ_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_APPROVAL_FIELD_NUMBER: _ClassVar[int]
    SAMPLING_FIELD_NUMBER: _ClassVar[int]
    UNSET_ENV_FIELD_NUMBER: _ClassVar[int]
    URL_FIELD_NUMBER: _ClassVar[int]
    allowed_tools: _containers.RepeatedScalarFieldContainer[str]
    args: _containers.RepeatedScalarFieldContainer[str]
    authorization: str
    command: str
    env: _containers.ScalarMap[str, str]
    headers: _containers.ScalarMap[str, str]
    max_reconnection_wait: _duration_pb2.Duration
    name: str
    oauth: OAuthClient
    read_timeout: _duration_pb2.Duration
    ref: str
    require_approval: ApprovalPolicy
    sampling: Sampling
    unset_env: _containers.RepeatedScalarFieldContainer[str]
    url: str
    def __init__(self, name: _Optional[str] = ..., url: _Optional[str] = ..., command: _Optional[str] = ..., ref: _Optional[str] = ..., authorization: _Optional[str] = ..., headers: _Optional[_Mapping[str, str]] = ..., max_reconnection_wait: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., args: _Optional[_Iterable[str]] = ..., env: _Optional[_Mapping[str, str]] = ..., unset_env: _Optional[_Iterable[str]] = ..., read_timeout: _Optional[_Union[_duration_pb2.Duration, _Mapping]] = ..., allowed_tools: _Optional[_Iterable[str]] = ..., require_approval: _Optional[_Union[ApprovalPolicy, _Mapping]] = ..., oauth: _Optional[_Union[OAuthClient, _Mapping]] = ..., sampling: _Optional[_Union[Sampling, _Mapping]] = ...) -> None: ...

class Money(_message.Message):
    __slots__ = ["currency", "nanos"]
    CURRENCY_FIELD_NUMBER: _ClassVar[int]
    NANOS_FIELD_NUMBER: _ClassVar[int]
    currency: str
    nanos: int
    def __init__(self, currency: _Optional[str] = ..., nanos: _Optional[int] = ...) -> None: ...

class OAuthClient(_message.Message):
    __slots__ = ["client_id", "client_secret", "grant", "identity_provider", "private_key", "private_key_id", "redirect_url", "scopes", "token_endpoint_auth_method"]
    CLIENT_ID_FIELD_NUMBER: _ClassVar[int]
    CLIENT_SECRET_FIELD_NUMBER: _ClassVar[int]
    GRANT_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_PROVIDER_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_KEY_FIELD_NUMBER: _ClassVar[int]
    PRIVATE_KEY_ID_FIELD_NUMBER: _ClassVar[int]
    REDIRECT_URL_FIELD_NUMBER: _ClassVar[int]
    SCOPES_FIELD_NUMBER: _ClassVar[int]
    TOKEN_ENDPOINT_AUTH_METHOD_FIELD_NUMBER: _ClassVar[int]
    client_id: str
    client_secret: str
    grant: GrantType
    identity_provider: IdentityProvider
    private_key: str
    private_key_id: str
    redirect_url: str
    scopes: _containers.RepeatedScalarFieldContainer[str]
    token_endpoint_auth_method: str
    def __init__(self, grant: _Optional[_Union[GrantType, str]] = ..., client_id: _Optional[str] = ..., client_secret: _Optional[str] = ..., private_key: _Optional[str] = ..., private_key_id: _Optional[str] = ..., scopes: _Optional[_Iterable[str]] = ..., token_endpoint_auth_method: _Optional[str] = ..., redirect_url: _Optional[str] = ..., identity_provider: _Optional[_Union[IdentityProvider, _Mapping]] = ...) -> None: ...

class Output(_message.Message):
    __slots__ = ["description", "name", "repair_turns", "schema", "strict"]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    REPAIR_TURNS_FIELD_NUMBER: _ClassVar[int]
    SCHEMA_FIELD_NUMBER: _ClassVar[int]
    STRICT_FIELD_NUMBER: _ClassVar[int]
    description: str
    name: str
    repair_turns: int
    schema: _struct_pb2.Struct
    strict: bool
    def __init__(self, name: _Optional[str] = ..., description: _Optional[str] = ..., schema: _Optional[_Union[_struct_pb2.Struct, _Mapping]] = ..., strict: bool = ..., repair_turns: _Optional[int] = ...) -> None: ...

class Sampling(_message.Message):
    __slots__ = ["max_tokens", "mode"]
    MAX_TOKENS_FIELD_NUMBER: _ClassVar[int]
    MODE_FIELD_NUMBER: _ClassVar[int]
    max_tokens: int
    mode: SamplingMode
    def __init__(self, mode: _Optional[_Union[SamplingMode, str]] = ..., max_tokens: _Optional[int] = ...) -> None: ...

class ToolNames(_message.Message):
    __slots__ = ["tool_names"]
    TOOL_NAMES_FIELD_NUMBER: _ClassVar[int]
    tool_names: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tool_names: _Optional[_Iterable[str]] = ...) -> None: ...

class OnLimit(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ElicitationPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class MCPStrategy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ToolNameConflict(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class SamplingMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class GrantType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class ApprovalMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
