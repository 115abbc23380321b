"""The compiled media (engine/media.cpp) against model/media.py, event for event."""

from hypothesis import given, settings

from .cases import check_media, check_media_groups, media_cases, media_group_cases


@settings(max_examples=150, deadline=None)
@given(media_cases())
def test_media_equal_event_for_event(case):
    check_media(case)


@settings(max_examples=60, deadline=None)
@given(media_group_cases())
def test_media_groups_equal(case):
    check_media_groups(case)
