//! Review mode (seed 002 §8): `null → pending → approved | rejected`.
//!
//! Pure transitions over the wire type [`ReviewState`]. A resolved review stays
//! resolved; entering again starts a new review. While a review is pending another
//! cannot start, and while a pending review is blocking, `request.send` is refused.

use keel_envelope::commands::{ChecklistUpdate, ReviewDecision};
use keel_envelope::ext::{ChecklistItem, ReviewComment, ReviewState, ReviewStatus};
use keel_envelope::{ErrorCode, ErrorPayload};

/// Whether `request.send` must be refused.
pub(crate) fn is_blocking(review: Option<&ReviewState>) -> bool {
    review.is_some_and(|r| r.status == ReviewStatus::Pending && r.blocking)
}

/// The refusal for a blocked `request.send`.
pub(crate) fn blocking_error(r: &ReviewState) -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::ReviewBlocking,
        format!(
            "a blocking review is pending ({}); resolve it before sending requests",
            r.reason
        ),
    )
    .with_detail("reviewId", r.review_id.clone())
}

fn not_found() -> ErrorPayload {
    ErrorPayload::new(
        ErrorCode::ReviewNotFound,
        "no review is pending (none was entered, or it is already resolved)",
    )
}

fn pending(review: &mut Option<ReviewState>) -> Result<&mut ReviewState, ErrorPayload> {
    match review {
        Some(r) if r.status == ReviewStatus::Pending => Ok(r),
        _ => Err(not_found()),
    }
}

/// Starts a review.
pub(crate) fn enter(
    review: &mut Option<ReviewState>,
    review_id: String,
    reason: &str,
    blocking: bool,
    checklist: &[String],
    requested_by: &str,
    now: u64,
) -> Result<ReviewState, ErrorPayload> {
    if let Some(r) = review
        .as_ref()
        .filter(|r| r.status == ReviewStatus::Pending)
    {
        return Err(ErrorPayload::new(
            ErrorCode::RequestInvalid,
            format!("review {} is still pending; resolve it first", r.review_id),
        )
        .with_detail("reviewId", r.review_id.clone()));
    }
    if reason.trim().is_empty() {
        return Err(
            ErrorPayload::new(ErrorCode::RequestInvalid, "the review reason is empty")
                .with_detail("field", "payload.reason"),
        );
    }
    let state = ReviewState::new(
        review_id,
        ReviewStatus::Pending,
        reason.to_owned(),
        requested_by.to_owned(),
        now,
        blocking,
        Vec::new(),
        checklist
            .iter()
            .enumerate()
            .map(|(i, title)| ChecklistItem::new(format!("k{}", i + 1), title.clone(), false))
            .collect::<Vec<_>>(),
    );
    *review = Some(state.clone());
    Ok(state)
}

/// Adds a comment and/or updates a checklist item of the pending review; all or
/// nothing.
pub(crate) fn submit(
    review: &mut Option<ReviewState>,
    comment: Option<&str>,
    item: Option<&ChecklistUpdate>,
    author: &str,
    now: u64,
) -> Result<ReviewState, ErrorPayload> {
    let r = pending(review)?;
    let comment = comment.filter(|c| !c.trim().is_empty());
    if comment.is_none() && item.is_none() {
        return Err(ErrorPayload::new(
            ErrorCode::RequestInvalid,
            "give a `comment`, a `checklistItem`, or both",
        )
        .with_detail("field", "payload.comment"));
    }
    if let Some(u) = item {
        if !r.checklist.iter().any(|c| c.id == u.id) {
            return Err(ErrorPayload::new(
                ErrorCode::RequestInvalid,
                format!("the review has no checklist item {:?}", u.id),
            )
            .with_detail("field", "payload.checklistItem.id")
            .with_detail("id", u.id.clone()));
        }
    }
    if let Some(text) = comment {
        let id = format!("c{}", r.comments.len() + 1);
        r.comments.push(ReviewComment::new(
            id,
            author.to_owned(),
            text.to_owned(),
            now,
        ));
    }
    if let Some(u) = item {
        if let Some(c) = r.checklist.iter_mut().find(|c| c.id == u.id) {
            c.done = u.done;
            if u.note.is_some() {
                c.note = u.note.clone();
            }
        }
    }
    Ok(r.clone())
}

/// Resolves the pending review.
pub(crate) fn resolve(
    review: &mut Option<ReviewState>,
    decision: ReviewDecision,
    summary: Option<&str>,
    resolved_by: &str,
    now: u64,
) -> Result<ReviewState, ErrorPayload> {
    let r = pending(review)?;
    let status = match decision {
        ReviewDecision::Approved => ReviewStatus::Approved,
        // Rejected (the codec accepts the known decisions only).
        _ => ReviewStatus::Rejected,
    };
    r.status = status.clone();
    r.decision = Some(status);
    r.resolved_by = Some(resolved_by.to_owned());
    r.resolved_at = Some(now);
    r.summary = summary.map(str::to_owned);
    Ok(r.clone())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    #[derive(Debug, Clone)]
    enum Op {
        Enter(bool, usize),
        Comment(String),
        Check(usize, bool),
        Resolve(bool),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            (any::<bool>(), 0usize..3).prop_map(|(b, n)| Op::Enter(b, n)),
            "[a-z ]{0,8}".prop_map(Op::Comment),
            (0usize..4, any::<bool>()).prop_map(|(i, d)| Op::Check(i, d)),
            any::<bool>().prop_map(Op::Resolve),
        ]
    }

    proptest! {
        /// A resolved review stays resolved (until a new one is entered, with a new
        /// id); failed operations change nothing; blocking follows pending + blocking.
        #[test]
        fn reviews_follow_their_state_machine(ops in proptest::collection::vec(op(), 0..40)) {
            let mut review: Option<ReviewState> = None;
            let mut n = 0u64;
            for op in ops {
                n += 1;
                let before = review.clone();
                let result = match &op {
                    Op::Enter(b, k) => {
                        let items: Vec<String> = (0..*k).map(|i| format!("item {i}")).collect();
                        enter(&mut review, format!("rev_{n}"), "why", *b, &items, "host", n)
                    }
                    Op::Comment(c) => submit(&mut review, Some(c), None, "host", n),
                    Op::Check(i, d) => {
                        let u = ChecklistUpdate::new(format!("k{}", i + 1)).done(*d);
                        submit(&mut review, None, Some(&u), "host", n)
                    }
                    Op::Resolve(ok) => {
                        let d = if *ok { ReviewDecision::Approved } else { ReviewDecision::Rejected };
                        resolve(&mut review, d, None, "host", n)
                    }
                };
                match result {
                    Err(e) => {
                        prop_assert_eq!(&review, &before);
                        let resolved_or_none = before.as_ref().is_none_or(|r| r.status != ReviewStatus::Pending);
                        if e.code == ErrorCode::ReviewNotFound {
                            prop_assert!(resolved_or_none);
                        }
                    }
                    Ok(r) => prop_assert_eq!(Some(&r), review.as_ref()),
                }
                if let (Some(b), Some(a)) = (&before, &review) {
                    if b.status != ReviewStatus::Pending && a.review_id == b.review_id {
                        prop_assert_eq!(a, b);
                    }
                }
                if let Some(r) = &review {
                    prop_assert_eq!(r.decision.is_some(), r.status != ReviewStatus::Pending);
                    prop_assert_eq!(r.resolved_at.is_some(), r.status != ReviewStatus::Pending);
                }
                prop_assert_eq!(
                    is_blocking(review.as_ref()),
                    review.as_ref().is_some_and(|r| r.blocking && r.status == ReviewStatus::Pending)
                );
            }
        }
    }
}
