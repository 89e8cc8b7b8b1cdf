"""privacy.action review: a row the privacy stage routed goes to an expert, whatever its scores."""

from __future__ import annotations

from ptfactory.annotators.routing import RoutingConfig, route
from ptfactory.filters.privacy import PrivacyConfig, clean_samples
from tests.annotators.test_routing import _last, _table


def test_a_row_privacy_routes_is_reviewed_not_auto_accepted() -> None:
    table = _table([(9.5, 0.1), (9.5, 0.1)], tag="Mail jo.smith@example.org: ")
    plain = route(table, RoutingConfig(audit_rate=0.0))[0]
    assert [reason for _, reason in _last(plain)] == ["auto_accept", "auto_accept"]  # the premise
    flagged, stats = clean_samples(table, PrivacyConfig(action="review"))
    assert stats.routed == 2
    routed = route(flagged, RoutingConfig(audit_rate=0.0, review_budget=1))[0]
    assert sorted(reason for _, reason in _last(routed)) == ["needs_review", "waiting"]
