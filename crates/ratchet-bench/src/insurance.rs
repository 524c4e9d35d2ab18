//! The activities of the insurance example (`examples/workflows/insurance.yaml`): a quote,
//! three underwriting checks, an escalation, a payment, the quote's withdrawal and the policy.
//!
//! Stand-ins for the services an insurer calls: each answers at once and only from its input
//! (and the instance id), so a run is repeatable and the bench measures Ratchet, not them.
//! `ratchet worker` registers them beside its samples, and `ratchet bench workflows` runs the
//! example on them.

use ratchet::{ActivityContext, ActivityError};
use serde::{Deserialize, Serialize};

/// The workflow's definition, as `examples/workflows/insurance.yaml` holds it.
pub(crate) const SOURCE: &str = include_str!("../../../examples/workflows/insurance.yaml");

/// The orchestration the example runs as (`namespace/name`).
pub(crate) const WORKFLOW: &str = "insurance/quote-to-policy";

/// Adds the example's activities to `builder`: `quote`, `credit_check`, `risk_score`,
/// `fraud_screen`, `escalate`, `take_payment`, `cancel_quote` and `issue_policy`.
pub fn register(builder: ratchet::Builder) -> ratchet::Builder {
    builder
        .activity("quote", quote)
        .activity("credit_check", credit_check)
        .activity("risk_score", risk_score)
        .activity("fraud_screen", fraud_screen)
        .activity("escalate", escalate)
        .activity("take_payment", take_payment)
        .activity("cancel_quote", cancel_quote)
        .activity("issue_policy", issue_policy)
}

/// Who asks for cover.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct Applicant {
    #[serde(default)]
    pub(crate) name: String,
    #[serde(default)]
    pub(crate) age: u32,
    /// The bureau's score, as the stand-in credit check reads it (650 when absent).
    #[serde(default)]
    pub(crate) credit_score: Option<u32>,
    /// Claims made in the last five years.
    #[serde(default)]
    pub(crate) claims: u32,
}

/// What the quote and the risk score are computed from.
#[derive(Deserialize)]
struct Cover {
    applicant: Applicant,
    product: String,
    coverage: u64,
}

/// A quote: its id, and the yearly premium in whole currency units.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Quote {
    quote_id: String,
    product: String,
    coverage: u64,
    premium: u64,
    currency: &'static str,
}

/// The yearly premium of `coverage` under `product` for `applicant`, or `None` for a product
/// the example does not sell: a rate per mille of the cover, loaded by 10 % per claim and by
/// 25 % under 25 years of age.
pub(crate) fn premium(product: &str, coverage: u64, applicant: &Applicant) -> Option<u64> {
    let per_mille = match product {
        "home" => 3,
        "contents" => 5,
        "life" => 2,
        "travel" => 10,
        _ => return None,
    };
    let young = if applicant.age < 25 { 25 } else { 0 };
    let loading = 100 + 10 * u64::from(applicant.claims) + young;
    Some(coverage.saturating_mul(per_mille) / 1000 * loading / 100)
}

async fn quote(ctx: ActivityContext, cover: Cover) -> Result<Quote, ActivityError> {
    let Some(premium) = premium(&cover.product, cover.coverage, &cover.applicant) else {
        return Err(ActivityError::non_retryable(
            "UnknownProduct",
            format!(
                "no product {:?} (home, contents, life, travel)",
                cover.product
            ),
        ));
    };
    Ok(Quote {
        quote_id: format!("Q-{}", ctx.instance_id()),
        product: cover.product,
        coverage: cover.coverage,
        premium,
        currency: "EUR",
    })
}

#[derive(Deserialize)]
struct Checked {
    applicant: Applicant,
}

#[derive(Serialize)]
struct Credit {
    score: u32,
    passed: bool,
}

async fn credit_check(_ctx: ActivityContext, input: Checked) -> Result<Credit, ActivityError> {
    let score = input.applicant.credit_score.unwrap_or(650);
    Ok(Credit {
        score,
        passed: score >= 600,
    })
}

#[derive(Serialize)]
struct Risk {
    score: u32,
    band: &'static str,
}

async fn risk_score(_ctx: ActivityContext, cover: Cover) -> Result<Risk, ActivityError> {
    let a = &cover.applicant;
    let mut score = 20 * a.claims;
    if a.age < 25 {
        score += 25;
    }
    if a.age > 75 {
        score += 15;
    }
    if cover.coverage > 500_000 {
        score += 20;
    }
    let score = score.min(100);
    let band = match score {
        0..=19 => "low",
        20..=59 => "medium",
        _ => "high",
    };
    Ok(Risk { score, band })
}

#[derive(Serialize)]
struct Fraud {
    flagged: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
}

/// Flags the applicant the security literature always casts as the attacker.
async fn fraud_screen(_ctx: ActivityContext, input: Checked) -> Result<Fraud, ActivityError> {
    let flagged = input.applicant.name.to_lowercase().contains("mallory");
    Ok(Fraud {
        flagged,
        reason: flagged.then(|| "the applicant is on the watch list".to_string()),
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Escalation {
    quote_id: String,
    #[serde(default)]
    reason: String,
}

#[derive(Serialize)]
struct Ticket {
    ticket: String,
    to: &'static str,
    reason: String,
}

async fn escalate(_ctx: ActivityContext, input: Escalation) -> Result<Ticket, ActivityError> {
    Ok(Ticket {
        ticket: format!("ESC-{}", input.quote_id),
        to: "supervisor",
        reason: input.reason,
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Charge {
    quote_id: String,
    amount: u64,
    /// This attempt's number, from 1: the workflow counts its attempts.
    attempt: u32,
    /// How many attempts the stand-in gateway fails, to show the workflow's retry.
    #[serde(default)]
    failures: u32,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Payment {
    payment_id: String,
    amount: u64,
    attempt: u32,
}

/// Fails the first `failures` attempts. Not retryable here: the workflow's `catch.retry` owns
/// the retry, on durable timers, so each attempt is a step of its history.
async fn take_payment(_ctx: ActivityContext, charge: Charge) -> Result<Payment, ActivityError> {
    if charge.attempt <= charge.failures {
        return Err(ActivityError::non_retryable(
            "PaymentUnavailable",
            format!(
                "the payment gateway did not answer (attempt {} of the {} asked to fail)",
                charge.attempt, charge.failures
            ),
        ));
    }
    Ok(Payment {
        payment_id: format!("PAY-{}-{}", charge.quote_id, charge.attempt),
        amount: charge.amount,
        attempt: charge.attempt,
    })
}

#[derive(Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
struct Withdrawal {
    quote_id: String,
    #[serde(default)]
    reason: String,
    #[serde(default)]
    cancelled: bool,
}

async fn cancel_quote(
    _ctx: ActivityContext,
    input: Withdrawal,
) -> Result<Withdrawal, ActivityError> {
    Ok(Withdrawal {
        cancelled: true,
        ..input
    })
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Issue {
    quote_id: String,
    premium: u64,
    payment_id: String,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Policy {
    policy_number: String,
    quote_id: String,
    premium: u64,
    payment_id: String,
}

async fn issue_policy(_ctx: ActivityContext, input: Issue) -> Result<Policy, ActivityError> {
    let number = input.quote_id.strip_prefix("Q-").unwrap_or(&input.quote_id);
    Ok(Policy {
        policy_number: format!("P-{number}"),
        quote_id: input.quote_id.clone(),
        premium: input.premium,
        payment_id: input.payment_id,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_example_compiles_against_these_activities() {
        let names = register(ratchet::Ratchet::builder()).names();
        let known = ratchet::workflow::Known::from_names(&names);
        let workflow = ratchet::workflow::Workflow::compile_with(SOURCE, &known);
        assert_eq!(
            workflow.map(|w| w.orchestration_name()).ok().as_deref(),
            Some(WORKFLOW)
        );
    }

    /// The paths `ratchet bench workflows` does not take (it takes the policy and the
    /// cancellation): each withdraws the quote, and rejection and refusals end as they should.
    #[tokio::test]
    async fn rejection_refusal_and_failed_payment_withdraw_the_quote() {
        use ratchet::InstanceStatus;
        use serde_json::{json, Value};
        use std::time::Duration;

        let dir = tempfile::tempdir().unwrap();
        let builder = register(ratchet::Ratchet::builder().sqlite(dir.path().join("t.db")));
        let workflow = ratchet::workflow::Workflow::compile(SOURCE).unwrap();
        let ratchet = builder.workflow(workflow, 1).start().await.unwrap();
        let client = ratchet.client();
        let start = |name: &str, claims: u32, extra: Value| {
            let mut input = json!({
                "applicant": {"name": name, "age": 40, "creditScore": 700, "claims": claims},
                "product": "home",
                "coverage": 100_000,
            });
            if let (Some(i), Value::Object(more)) = (input.as_object_mut(), extra) {
                i.extend(more);
            }
            client.start(WORKFLOW, input)
        };
        let wait = Duration::from_secs(30);
        let mut ids = Vec::new();

        // No claims: no underwriter; the customer says no.
        let rejected = start("Ada", 0, json!({})).await.unwrap();
        let id = rejected.id().to_string();
        client
            .signal(&id, "acceptance", json!({"accepted": false}))
            .await
            .unwrap();
        ids.push(id.clone());
        let out = rejected.wait(wait).await.unwrap();
        assert_eq!(out.status, InstanceStatus::Completed);
        let output = out.output.unwrap();
        assert_eq!(output["status"], "rejected");
        assert_eq!(
            output["cancellation"]["quoteId"],
            format!("Q-{id}").as_str()
        );

        // The fraud screen flags her.
        let flagged = start("Mallory", 0, json!({})).await.unwrap();
        ids.push(flagged.id().to_string());
        let out = flagged.wait(wait).await.unwrap();
        assert_eq!(out.status, InstanceStatus::Failed);
        assert_eq!(out.error.unwrap().kind, "Declined");

        // The underwriter refuses.
        let refused = start("Bob", 2, json!({})).await.unwrap();
        let id = refused.id().to_string();
        client
            .signal(&id, "approval", json!({"approved": false}))
            .await
            .unwrap();
        ids.push(id);
        let out = refused.wait(wait).await.unwrap();
        assert_eq!(out.status, InstanceStatus::Failed);
        assert_eq!(out.error.unwrap().kind, "Declined");

        // Every payment attempt fails: three, then the quote is withdrawn.
        let unpaid = start("Carol", 0, json!({"paymentFailures": 3}))
            .await
            .unwrap();
        let id = unpaid.id().to_string();
        client
            .signal(&id, "acceptance", json!({"accepted": true}))
            .await
            .unwrap();
        ids.push(id);
        let out = unpaid.wait(wait).await.unwrap();
        assert_eq!(out.status, InstanceStatus::Failed);
        assert_eq!(out.error.unwrap().kind, "PaymentFailed");

        for id in &ids {
            let withdrawn = client
                .history(id)
                .await
                .unwrap()
                .iter()
                .filter(|r| {
                    matches!(&r.event, ratchet::HistoryEvent::ActivityCompleted { output, .. }
                        if output["cancelled"] == true)
                })
                .count();
            assert_eq!(withdrawn, 1, "{id}: the quote withdrawn once");
        }
        ratchet.shutdown().await;
    }

    #[test]
    fn premiums_are_loaded_by_claims_and_youth() {
        let mut a = Applicant {
            age: 36,
            ..Applicant::default()
        };
        assert_eq!(premium("home", 250_000, &a), Some(750));
        a.claims = 2;
        assert_eq!(premium("home", 250_000, &a), Some(900));
        a.age = 20;
        assert_eq!(premium("home", 250_000, &a), Some(1087));
        assert_eq!(premium("yacht", 250_000, &a), None);
    }
}
