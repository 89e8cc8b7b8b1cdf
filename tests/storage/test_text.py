import pyarrow as pa
import pytest

from ptfactory.errors import SchemaError
from ptfactory.storage.schema import prompt_of, response_of, row_texts

SYSTEM = {"role": "system", "content": "Be brief."}
ASK = {"role": "user", "content": "What is 2+2?"}
ANSWER = {"role": "assistant", "content": "4"}
FOLLOW_UP = {"role": "user", "content": "And 3+3?"}
SECOND = {"role": "assistant", "content": "6"}


def test_system_turn_is_not_the_prompt() -> None:
    messages = [SYSTEM, ASK, ANSWER]
    assert prompt_of(messages) == "What is 2+2?"
    assert response_of(messages) == "4"
    assert prompt_of(messages, context=True) == "[system] Be brief.\n\n[user] What is 2+2?"


def test_multi_turn_first_user_turn_and_final_answer() -> None:
    messages = [ASK, ANSWER, FOLLOW_UP, SECOND]
    assert prompt_of(messages) == "What is 2+2?"  # the first user turn, not the last
    assert response_of(messages) == "6"
    assert response_of(messages, final_turn=False) == "6"
    assert prompt_of(messages, context=True) == ("[user] What is 2+2?\n\n[assistant] 4\n\n[user] And 3+3?")


def test_conversation_ending_on_a_user_turn() -> None:
    messages = [ASK, ANSWER, FOLLOW_UP]
    assert response_of(messages) == ""  # the final turn is not an answer: no response yet
    assert response_of(messages, final_turn=False) == "4"  # the last answer wherever it is
    assert prompt_of(messages, context=True).endswith("[user] And 3+3?")  # nothing cut


def test_no_assistant_turn() -> None:
    assert response_of([SYSTEM, ASK]) == ""
    assert response_of([SYSTEM, ASK], final_turn=False) == ""
    assert prompt_of([ASK]) == "What is 2+2?"
    assert prompt_of([ASK], context=True) == "What is 2+2?"  # one turn: its bare content


def test_no_user_turn() -> None:
    assert prompt_of([SYSTEM]) == ""
    with pytest.raises(SchemaError, match=r"no user turn \(its roles: system\)"):
        prompt_of([SYSTEM], required=True)


@pytest.mark.parametrize("messages", [[], None])
def test_empty_messages(messages: list[dict[str, str]] | None) -> None:
    assert prompt_of(messages) == ""
    assert prompt_of(messages, context=True) == ""
    assert response_of(messages) == ""
    assert response_of(messages, final_turn=False) == ""
    with pytest.raises(SchemaError, match=r"its roles: none"):
        prompt_of(messages, required=True)


def test_row_texts_joins_every_turn() -> None:
    table = pa.table({"messages": [[SYSTEM, ASK, ANSWER], None]})
    assert row_texts(table).to_pylist() == ["Be brief.\nWhat is 2+2?\n4", ""]
