from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
ROLE_ASSISTANT: Role
ROLE_TOOL: Role
ROLE_UNSPECIFIED: Role
ROLE_USER: Role

class Media(_message.Message):
    __slots__ = ["data", "mime_type", "name", "uri"]
    DATA_FIELD_NUMBER: _ClassVar[int]
    MIME_TYPE_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    URI_FIELD_NUMBER: _ClassVar[int]
    data: bytes
    mime_type: str
    name: str
    uri: str
    def __init__(self, mime_type: _Optional[str] = ..., data: _Optional[bytes] = ..., uri: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class Message(_message.Message):
    __slots__ = ["parts", "role"]
    PARTS_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    parts: _containers.RepeatedCompositeFieldContainer[Part]
    role: Role
    def __init__(self, role: _Optional[_Union[Role, str]] = ..., parts: _Optional[_Iterable[_Union[Part, _Mapping]]] = ...) -> None: ...

class Part(_message.Message):
    __slots__ = ["media", "provider_tool_call", "reasoning", "text", "tool_call", "tool_result"]
    MEDIA_FIELD_NUMBER: _ClassVar[int]
    PROVIDER_TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    REASONING_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_FIELD_NUMBER: _ClassVar[int]
    TOOL_RESULT_FIELD_NUMBER: _ClassVar[int]
    media: Media
    provider_tool_call: ProviderToolCall
    reasoning: Reasoning
    text: str
    tool_call: ToolCall
    tool_result: ToolResult
    def __init__(self, text: _Optional[str] = ..., tool_call: _Optional[_Union[ToolCall, _Mapping]] = ..., tool_result: _Optional[_Union[ToolResult, _Mapping]] = ..., media: _Optional[_Union[Media, _Mapping]] = ..., provider_tool_call: _Optional[_Union[ProviderToolCall, _Mapping]] = ..., reasoning: _Optional[_Union[Reasoning, _Mapping]] = ...) -> None: ...

class ProviderToolCall(_message.Message):
    __slots__ = ["arguments", "id", "is_error", "output", "server_name", "tool_name"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    SERVER_NAME_FIELD_NUMBER: _ClassVar[int]
    TOOL_NAME_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    id: str
    is_error: bool
    output: str
    server_name: str
    tool_name: str
    def __init__(self, id: _Optional[str] = ..., server_name: _Optional[str] = ..., tool_name: _Optional[str] = ..., arguments: _Optional[str] = ..., output: _Optional[str] = ..., is_error: bool = ...) -> None: ...

class Reasoning(_message.Message):
    __slots__ = ["provider", "redacted", "signature", "text"]
    PROVIDER_FIELD_NUMBER: _ClassVar[int]
    REDACTED_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    provider: str
    redacted: bool
    signature: str
    text: str
    def __init__(self, text: _Optional[str] = ..., signature: _Optional[str] = ..., provider: _Optional[str] = ..., redacted: bool = ...) -> None: ...

class ToolCall(_message.Message):
    __slots__ = ["arguments", "id", "name"]
    ARGUMENTS_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    arguments: str
    id: str
    name: str
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., arguments: _Optional[str] = ...) -> None: ...

class ToolResult(_message.Message):
    __slots__ = ["attachments", "is_error", "name", "output", "tool_call_id"]
    ATTACHMENTS_FIELD_NUMBER: _ClassVar[int]
    IS_ERROR_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_FIELD_NUMBER: _ClassVar[int]
    TOOL_CALL_ID_FIELD_NUMBER: _ClassVar[int]
    attachments: _containers.RepeatedCompositeFieldContainer[Media]
    is_error: bool
    name: str
    output: str
    tool_call_id: str
    def __init__(self, tool_call_id: _Optional[str] = ..., name: _Optional[str] = ..., output: _Optional[str] = ..., is_error: bool = ..., attachments: _Optional[_Iterable[_Union[Media, _Mapping]]] = ...) -> None: ...

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
