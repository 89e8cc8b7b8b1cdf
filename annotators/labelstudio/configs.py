"""Labeling configs: one review queue (one Label Studio project) per sample kind.

Every config shows the instruction, the response(s) and the judges' opinions in plain text, and
asks for a verdict; names of the controls are what :mod:`ptfactory.annotators.labelstudio.results` reads.
"""

from __future__ import annotations

__all__ = ["LABEL_CONFIGS", "QUEUES", "project_title"]

_HEADER = """
  <Header value="Instruction"/>
  <Text name="instruction" value="$instruction"/>
"""

_JUDGES = """
  <Header value="What the judges said"/>
  <Text name="judges" value="$judges"/>
"""

SFT = f"""<View>
{_HEADER}
  <Header value="Response"/>
  <Text name="response" value="$response"/>
{_JUDGES}
  <Choices name="verdict" toName="response" choice="single" showInline="true" required="true">
    <Choice value="accept"/>
    <Choice value="reject"/>
  </Choices>
  <Rating name="rating" toName="response" maxRating="5"/>
  <TextArea name="corrected" toName="response" editable="true" maxSubmissions="1"
            placeholder="A corrected response (optional): replaces the original"/>
</View>
"""

CODE = f"""<View>
{_HEADER}
  <Header value="Solution"/>
  <Text name="response" value="$response"/>
  <Header value="Tests"/>
  <Text name="tests" value="$tests"/>
  <Header value="Execution log"/>
  <Text name="execution" value="$execution"/>
{_JUDGES}
  <Choices name="verdict" toName="response" choice="single" showInline="true" required="true">
    <Choice value="accept"/>
    <Choice value="reject"/>
  </Choices>
  <TextArea name="corrected" toName="response" editable="true" maxSubmissions="1"
            placeholder="A corrected solution (optional)"/>
</View>
"""

PREFERENCE = f"""<View>
{_HEADER}
  <Header value="Response A"/>
  <Text name="response_a" value="$response_a"/>
  <Header value="Response B"/>
  <Text name="response_b" value="$response_b"/>
{_JUDGES}
  <Choices name="preference" toName="response_a" choice="single" showInline="true" required="true">
    <Choice value="A"/>
    <Choice value="B"/>
    <Choice value="tie"/>
  </Choices>
  <TextArea name="reason" toName="response_a" maxSubmissions="1" placeholder="Why (optional)"/>
</View>
"""

QUEUES = ("sft", "code", "preference")
LABEL_CONFIGS = {"sft": SFT, "code": CODE, "preference": PREFERENCE}


def project_title(prefix: str, queue: str) -> str:
    if queue not in LABEL_CONFIGS:
        raise ValueError(f"unknown review queue {queue!r}; known: {', '.join(QUEUES)}")
    return f"{prefix}: {queue}"
