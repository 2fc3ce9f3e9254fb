"""Every error dsh-session raises, as one hierarchy.

Each error carries the data a caller needs to act on it (event type, seq, plugin, path)
as attributes, and its message says what went wrong and what to do about it::

    DshSessionError
    ├── AppendError (ValueError)           an append was refused; the log is untouched
    │   ├── NotJsonError                   the payload is not a lossless JSON value
    │   │   └── TooDeepError               it nests deeper than the log format's limit
    │   ├── EventTypeError                 the event type is not a string
    │   ├── SchemaError                    the payload does not match its registered schema
    │   └── SurfaceIntentError             missing, misplaced or invalid surface op
    ├── SurfaceError (ValueError)          the surface of a seeded log cannot be folded
    ├── SeedError (ValueError)             a seed log breaks the seeding rules
    ├── SessionCwdError (ValueError)       a session cwd is not an absolute path
    ├── SessionForkError                   a fork was refused (with a ``code``)
    ├── RequestHeaderError (ValueError)    the request-header fold met a corrupt log
    ├── ToolPairingError (ValueError)      the surface holds a result with no call
    ├── InvariantError                     the opt-in dev invariants saw a violation
    ├── LogFormatError (ValueError)        a JSONL log file cannot be read
    │   └── MisplacedLogError              a log's header names another session than its file
    ├── PersistenceError                   a durable store refused (collision, seq mismatch)
    │   ├── SessionExistsError (KeyError)  a session id is already live, or stored
    │   ├── SessionNotStoredError (LookupError)  nothing is stored under this id
    │   ├── StoreWriteError (OSError)      a durable write failed (names the session, the log)
    │   ├── EncryptionError                an encrypted store refused to read or write
    │   │   ├── EncryptedSessionError      a session sealed at rest, read without keys
    │   │   ├── KeyUnavailableError        a record's key is not in the keyring (or deleted)
    │   │   └── SealedRecordError          a record fails authentication, or is plaintext
    │   └── LinkedLogError                 a write would follow a symbolic link out of a store
    ├── SessionLockedError                 another writer holds the session's writer lock
    ├── ReadOnlySessionError               an append to a session read with read_session
    ├── SchemaVersionError (RuntimeError)  a SQLite database of another schema version
    ├── StoreKindError                     a JSONL store folder opened as the other kind
    ├── StoreFolderError (FileNotFoundError)  a store whose folder does not exist
    ├── StoreUrlError (ValueError)         a store URL that names no store dsh-session opens
    ├── MissingExtraError (ImportError)    a feature needs an extra that is not installed
    ├── InspectError                       the read model cannot answer (a message and a hint)
    │   ├── InspectUsageError (ValueError) it was asked wrongly: a bad id, filter or URL
    │   ├── SessionNotFoundError (LookupError)  no such session (and no such file)
    │   │   └── AmbiguousSessionError      a name or id prefix that names several sessions
    │   └── SourceReadError                a log or a store that cannot be read
    ├── UnstorableError (ValueError)       a value the SQLite schema cannot store losslessly
    │   └── SessionIdError                 a session id the backend's id rule refuses
    └── PluginError
        ├── PluginConflictError (RuntimeError)   two distributions use one entry-point name
        ├── DuplicateEventTypeError (ValueError) two plugins declare one event type
        └── UnknownProjectionError (LookupError) a read names a projection none declares

Messages quoting the reference implementation keep its exact wording (tests match on
them), so that a log rejected by one implementation is rejected for the same reason by
the other.
"""

from __future__ import annotations

# The classes live in one private module per group (see _errors/base.py for why each
# still names this module as its own).
from ._errors.append import (
    AppendError,
    EventTypeError,
    NotJsonError,
    SchemaError,
    SurfaceIntentError,
    TooDeepError,
    UnknownEventTypeError,
    UnknownFieldError,
    UnknownMemberError,
)
from ._errors.base import DshSessionError
from ._errors.crypt import (
    EncryptedSessionError,
    EncryptionError,
    KeyUnavailableError,
    SealedRecordError,
)
from ._errors.inspect import (
    AmbiguousSessionError,
    InspectError,
    InspectUsageError,
    SessionNotFoundError,
    SourceReadError,
)
from ._errors.log import (
    InvariantError,
    LogFormatError,
    MisplacedLogError,
    RequestHeaderError,
    SeedError,
    SessionCwdError,
    SessionExistsError,
    SessionForkError,
    SkippedLogWarning,
    SurfaceError,
    ToolPairingError,
    UnreadableSessionWarning,
)
from ._errors.plugin import (
    DuplicateEventTypeError,
    DuplicateUnionMemberError,
    PluginConflictError,
    PluginError,
    UnknownPluginWarning,
    UnknownProjectionError,
)
from ._errors.store import (
    LinkedLogError,
    MissingExtraError,
    PersistenceError,
    ReadOnlySessionError,
    SchemaVersionError,
    SessionIdError,
    SessionLockedError,
    SessionNotStoredError,
    StoreFolderError,
    StoreKindError,
    StoreNotFoundError,
    StoreUrlError,
    StoreWriteError,
    UnstorableError,
)

# typing costs ~10 ms to import: `dsh-session --help` must not pay for it.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from ._errors.log import ForkErrorCode as ForkErrorCode

__all__ = [
    "AmbiguousSessionError",
    "AppendError",
    "DshSessionError",
    "DuplicateEventTypeError",
    "DuplicateUnionMemberError",
    "EncryptedSessionError",
    "EncryptionError",
    "EventTypeError",
    "InspectError",
    "InspectUsageError",
    "InvariantError",
    "KeyUnavailableError",
    "LinkedLogError",
    "LogFormatError",
    "MisplacedLogError",
    "MissingExtraError",
    "NotJsonError",
    "PersistenceError",
    "PluginConflictError",
    "PluginError",
    "ReadOnlySessionError",
    "RequestHeaderError",
    "SchemaError",
    "SchemaVersionError",
    "SealedRecordError",
    "SeedError",
    "SessionCwdError",
    "SessionExistsError",
    "SessionForkError",
    "SessionIdError",
    "SessionLockedError",
    "SessionNotFoundError",
    "SessionNotStoredError",
    "SkippedLogWarning",
    "SourceReadError",
    "StoreFolderError",
    "StoreKindError",
    "StoreNotFoundError",
    "StoreUrlError",
    "StoreWriteError",
    "SurfaceError",
    "SurfaceIntentError",
    "TooDeepError",
    "ToolPairingError",
    "UnknownEventTypeError",
    "UnknownFieldError",
    "UnknownMemberError",
    "UnknownPluginWarning",
    "UnknownProjectionError",
    "UnreadableSessionWarning",
    "UnstorableError",
]
