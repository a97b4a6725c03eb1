"""Plan review by a person (:mod:`ragplan.nodes.common.review_plan`): the settings every plan-writing family adds
to its context (declared in :mod:`ragplan.state.context`, which the CLI reads without pydantic), and the record of
each answer a reviewer gives (``plan_reviews``)."""

from __future__ import annotations

import operator
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from ragplan.state.context import PlanReviewSettings
from ragplan.state.result import GraphOutput, GraphResult
from ragplan.state.stop_reason import StopReason

__all__ = ["PlanReviewSettings", "PlanReview", "PlanReviews", "ReviewedOutput", "ReviewedResult", "REVIEW_OFF",
           "REVIEW_ANSWERS", "PLAN_REJECTED", "AWAITING_REVIEW"]

PLAN_REJECTED: StopReason = "plan_rejected"
"""The stop reason of a run whose plan a reviewer rejected (no answer is generated)."""

AWAITING_REVIEW = "awaiting_review"
"""The stop reason the Python API reports for a run paused at a review with no one to answer it."""

REVIEW_OFF = {"review_plan": False, "review_replans": False}
"""Settings that turn review off (batch evaluation never pauses)."""

REVIEW_ANSWERS = ('{"action": "approve"}', '{"action": "edit", "plan": "<the new plan>"}',
                  '{"action": "reject", "reason": "<why>"}', '"approve"', '"reject"')
"""The resume values a review accepts (``Command(resume=…)``)."""


class PlanReview(BaseModel):
    """One answer a reviewer gave to one paused plan."""

    kind: Literal["plan", "replan"] = Field(description="plan = the first plan; replan = a revision made in the run.")
    round: int = Field(default=1, description="1-based answer number in this review (an invalid edit is asked again).")
    action: Literal["approve", "edit", "reject", "invalid"] = Field(
        description="What the reviewer decided; invalid = an edit that did not validate or an unreadable answer.")
    plan: str = Field(default="", description="The plan as it was shown.")
    edited: str = Field(default="", description="The plan put in its place (action = edit), as the family prints it.")
    reason: str = Field(default="", description="The reviewer's reason (reject), if given.")
    error: str = Field(default="", description="Why the answer was refused (action = invalid).")


PlanReviews = Annotated[list[PlanReview], operator.add]
"""The ``plan_reviews`` state field: every review answer, in order (appended by the review node)."""


class ReviewedOutput(GraphOutput, total=False):
    """What a graph whose plan a person may review returns besides its family's fields."""

    plan_reviews: PlanReviews
    """Every answer a person gave to a paused plan (review_plan / review_replans), in order."""


class ReviewedResult(GraphResult):
    """The typed result of a graph whose plan a person may review."""

    plan_reviews: list[PlanReview] = Field(default_factory=list, description="Every answer a person gave to a paused plan.")
