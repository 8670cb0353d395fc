from google.api import annotations_pb2 as _annotations_pb2
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Optional as _Optional

DESCRIPTOR: _descriptor.FileDescriptor

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
