from agentd.v1 import message_pb2 as _message_pb2
from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor
MULTITASK_ENQUEUE: Multitask
MULTITASK_INTERRUPT: Multitask
MULTITASK_REJECT: Multitask
MULTITASK_UNSPECIFIED: Multitask
ON_FAILURE_DISCARD: OnFailure
ON_FAILURE_KEEP_INPUT: OnFailure
ON_FAILURE_UNSPECIFIED: OnFailure

class CreateThreadRequest(_message.Message):
    __slots__ = ["expires_at", "messages", "metadata"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    MESSAGES_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    expires_at: _timestamp_pb2.Timestamp
    messages: _containers.RepeatedCompositeFieldContainer[_message_pb2.Message]
    metadata: _containers.ScalarMap[str, str]
    def __init__(self, metadata: _Optional[_Mapping[str, str]] = ..., messages: _Optional[_Iterable[_Union[_message_pb2.Message, _Mapping]]] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CreateThreadResponse(_message.Message):
    __slots__ = ["thread"]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    thread: Thread
    def __init__(self, thread: _Optional[_Union[Thread, _Mapping]] = ...) -> None: ...

class DeleteThreadRequest(_message.Message):
    __slots__ = ["thread_id"]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    def __init__(self, thread_id: _Optional[str] = ...) -> None: ...

class DeleteThreadResponse(_message.Message):
    __slots__ = ["generations_deleted", "items_deleted"]
    GENERATIONS_DELETED_FIELD_NUMBER: _ClassVar[int]
    ITEMS_DELETED_FIELD_NUMBER: _ClassVar[int]
    generations_deleted: int
    items_deleted: int
    def __init__(self, items_deleted: _Optional[int] = ..., generations_deleted: _Optional[int] = ...) -> None: ...

class ForkThreadRequest(_message.Message):
    __slots__ = ["metadata", "thread_id", "up_to_item_id"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    METADATA_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    UP_TO_ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    metadata: _containers.ScalarMap[str, str]
    thread_id: str
    up_to_item_id: str
    def __init__(self, thread_id: _Optional[str] = ..., up_to_item_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ForkThreadResponse(_message.Message):
    __slots__ = ["thread"]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    thread: Thread
    def __init__(self, thread: _Optional[_Union[Thread, _Mapping]] = ...) -> None: ...

class GetThreadRequest(_message.Message):
    __slots__ = ["thread_id"]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    thread_id: str
    def __init__(self, thread_id: _Optional[str] = ...) -> None: ...

class GetThreadResponse(_message.Message):
    __slots__ = ["thread"]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    thread: Thread
    def __init__(self, thread: _Optional[_Union[Thread, _Mapping]] = ...) -> None: ...

class ListThreadItemsRequest(_message.Message):
    __slots__ = ["newest_first", "page_size", "page_token", "thread_id"]
    NEWEST_FIRST_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    newest_first: bool
    page_size: int
    page_token: str
    thread_id: str
    def __init__(self, thread_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., newest_first: bool = ...) -> None: ...

class ListThreadItemsResponse(_message.Message):
    __slots__ = ["items", "next_page_token"]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ThreadItem]
    next_page_token: str
    def __init__(self, items: _Optional[_Iterable[_Union[ThreadItem, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ListThreadsRequest(_message.Message):
    __slots__ = ["metadata", "page_size", "page_token"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    METADATA_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    metadata: _containers.ScalarMap[str, str]
    page_size: int
    page_token: str
    def __init__(self, metadata: _Optional[_Mapping[str, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListThreadsResponse(_message.Message):
    __slots__ = ["next_page_token", "threads"]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    THREADS_FIELD_NUMBER: _ClassVar[int]
    next_page_token: str
    threads: _containers.RepeatedCompositeFieldContainer[Thread]
    def __init__(self, threads: _Optional[_Iterable[_Union[Thread, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class Thread(_message.Message):
    __slots__ = ["active_generation_id", "created_at", "expires_at", "item_count", "metadata", "queued_generation_ids", "thread_id", "updated_at"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    ACTIVE_GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    ITEM_COUNT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    QUEUED_GENERATION_IDS_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    active_generation_id: str
    created_at: _timestamp_pb2.Timestamp
    expires_at: _timestamp_pb2.Timestamp
    item_count: int
    metadata: _containers.ScalarMap[str, str]
    queued_generation_ids: _containers.RepeatedScalarFieldContainer[str]
    thread_id: str
    updated_at: _timestamp_pb2.Timestamp
    def __init__(self, thread_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., item_count: _Optional[int] = ..., active_generation_id: _Optional[str] = ..., queued_generation_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class ThreadItem(_message.Message):
    __slots__ = ["created_at", "generation_id", "item_id", "message", "position"]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    GENERATION_ID_FIELD_NUMBER: _ClassVar[int]
    ITEM_ID_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    POSITION_FIELD_NUMBER: _ClassVar[int]
    created_at: _timestamp_pb2.Timestamp
    generation_id: str
    item_id: str
    message: _message_pb2.Message
    position: int
    def __init__(self, item_id: _Optional[str] = ..., position: _Optional[int] = ..., message: _Optional[_Union[_message_pb2.Message, _Mapping]] = ..., generation_id: _Optional[str] = ..., created_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class UpdateThreadRequest(_message.Message):
    __slots__ = ["clear_expires_at", "expires_at", "metadata", "replace_metadata", "thread_id"]
    class MetadataEntry(_message.Message):
        __slots__ = ["key", "value"]
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    CLEAR_EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_AT_FIELD_NUMBER: _ClassVar[int]
    METADATA_FIELD_NUMBER: _ClassVar[int]
    REPLACE_METADATA_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    clear_expires_at: bool
    expires_at: _timestamp_pb2.Timestamp
    metadata: _containers.ScalarMap[str, str]
    replace_metadata: bool
    thread_id: str
    def __init__(self, thread_id: _Optional[str] = ..., metadata: _Optional[_Mapping[str, str]] = ..., replace_metadata: bool = ..., expires_at: _Optional[_Union[_timestamp_pb2.Timestamp, _Mapping]] = ..., clear_expires_at: bool = ...) -> None: ...

class UpdateThreadResponse(_message.Message):
    __slots__ = ["thread"]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    thread: Thread
    def __init__(self, thread: _Optional[_Union[Thread, _Mapping]] = ...) -> None: ...

class Multitask(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []

class OnFailure(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = []
