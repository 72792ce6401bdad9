"""Group positions: where consumer groups stand on the source, and the same place on the destination.

The one face other wings use; what is behind it may change without them knowing.
- `GroupCommit`, `RecordTimestamps`, `ensure_consumer_timestamps`, `settle_consumer_timestamps`: the
  topic of group positions and the timestamps of the records they point at
  (`consumer_timestamps`); `CommittedOffsetPoller`, `current_commits`, `stamped`: dr-stream's
  own writer of it, from committed offsets (`poller`).
- `Translation`: one position translated (`translation_rule`, pure); `OffsetTranslator`: the
  rule applied with its inputs from the index and the clusters (`offset_translator`);
  `ReturnedRecords`, `maps_back`: copies that map back to originals (`returned_records`).
- `TranslateQuery`: a running flow's translate query over `__consumer_timestamps`
  (`translate_query`, its Spark steps in `position_records`), feeding its `LiveTranslation`
  (`live_translation`), which the poller's hand-overs feed too, and which takes a position only
  once a source commit backs it (`CommitBacking`, `commit_backing`); each outcome recorded in
  the `TranslationLog` (`translation_log`).
- `GroupSync`, `GroupsRead`, `SyncAction`, `sync_translations`: when and how a destination group is written
  (`group_sync`), each partition's result a `Synced`, its outcome a `SyncOutcome` (`sync_outcome`); `ShareGroupSync`:
  the same for share groups' start offsets, in a flow (`share_group_sync`).

Names resolve at first use, so a command that only translates does not import Spark.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from dr_stream.face import resolver

if TYPE_CHECKING:
    from dr_stream.positions.commit_backing import CommitBacking
    from dr_stream.positions.consumer_timestamps import GroupCommit, RecordTimestamps
    from dr_stream.positions.consumer_timestamps import ensure_topic as ensure_consumer_timestamps
    from dr_stream.positions.consumer_timestamps import settle_topic as settle_consumer_timestamps
    from dr_stream.positions.group_sync import GroupsRead, GroupSync, SyncAction, sync_translations
    from dr_stream.positions.live_translation import LiveTranslation
    from dr_stream.positions.offset_translator import OffsetTranslator
    from dr_stream.positions.poller import CommittedOffsetPoller, current_commits, stamped
    from dr_stream.positions.returned_records import ReturnedRecords, maps_back
    from dr_stream.positions.share_group_sync import ShareGroupSync
    from dr_stream.positions.sync_outcome import Synced, SyncOutcome
    from dr_stream.positions.translate_query import TranslateQuery
    from dr_stream.positions.translation_log import TranslationLog
    from dr_stream.positions.translation_rule import Translation

# name on the face -> (module, name there)
_FACE = {
    "CommitBacking": ("commit_backing", "CommitBacking"),
    "GroupCommit": ("consumer_timestamps", "GroupCommit"),
    "RecordTimestamps": ("consumer_timestamps", "RecordTimestamps"),
    "ensure_consumer_timestamps": ("consumer_timestamps", "ensure_topic"),
    "settle_consumer_timestamps": ("consumer_timestamps", "settle_topic"),
    "CommittedOffsetPoller": ("poller", "CommittedOffsetPoller"),
    "current_commits": ("poller", "current_commits"),
    "stamped": ("poller", "stamped"),
    "Translation": ("translation_rule", "Translation"),
    "OffsetTranslator": ("offset_translator", "OffsetTranslator"),
    "ReturnedRecords": ("returned_records", "ReturnedRecords"),
    "maps_back": ("returned_records", "maps_back"),
    "LiveTranslation": ("live_translation", "LiveTranslation"),
    "TranslationLog": ("translation_log", "TranslationLog"),
    "TranslateQuery": ("translate_query", "TranslateQuery"),
    "GroupSync": ("group_sync", "GroupSync"),
    "GroupsRead": ("group_sync", "GroupsRead"),
    "SyncAction": ("group_sync", "SyncAction"),
    "sync_translations": ("group_sync", "sync_translations"),
    "ShareGroupSync": ("share_group_sync", "ShareGroupSync"),
    "SyncOutcome": ("sync_outcome", "SyncOutcome"),
    "Synced": ("sync_outcome", "Synced"),
}
__all__ = [
    "CommitBacking",
    "CommittedOffsetPoller",
    "GroupCommit",
    "GroupSync",
    "GroupsRead",
    "LiveTranslation",
    "OffsetTranslator",
    "RecordTimestamps",
    "ReturnedRecords",
    "ShareGroupSync",
    "SyncAction",
    "SyncOutcome",
    "Synced",
    "TranslateQuery",
    "Translation",
    "TranslationLog",
    "current_commits",
    "ensure_consumer_timestamps",
    "maps_back",
    "settle_consumer_timestamps",
    "stamped",
    "sync_translations",
]

__getattr__ = resolver(__name__, _FACE)
