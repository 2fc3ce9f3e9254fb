"""``to_openai_responses``: the derived history as Responses input items, checked against
the ``openai`` SDK's ``ResponseInputItemParam`` (the corpus and
generated histories: test_every_converter)."""

from __future__ import annotations

from sdk_check import check_responses

from dsh_session_core import vocabulary as v
from dsh_session_core.providers import to_openai_responses

PNG = v.ImageBlock(media_type="image/png", url="https://example.com/a.png")


def test_items_keep_the_block_order() -> None:
    history = [
        v.Message(role="user", content=(v.TextBlock(text="look"), PNG)),
        v.Message(role="assistant", content=(
            v.ReasoningBlock(text="plan", id="rs_a", encrypted_content="enc"),
            v.ReasoningBlock(text="then look", id="rs_a"),  # the same item's second part
            v.ReasoningBlock(text="mine"),  # not the provider's: no id to send it by
            v.TextBlock(text="Looking."),
            v.ToolCallBlock(id="c1", name="bash", arguments='{"cmd":"ls"}'),
            v.TextBlock(text="And:"), v.ToolCallBlock(id="c2", name="shot", arguments="{}"))),
        v.Message(role="user", content=(
            v.ToolResultBlock(tool_call_id="c1", content=(v.TextBlock(text="a.txt"),),
                            is_error=False),)),
        v.Message(role="user", content=(
            v.ToolResultBlock(tool_call_id="c2", content=(v.TextBlock(text="x"), PNG),
                            is_error=True), v.TextBlock(text="go on"))),
    ]
    out = to_openai_responses(history)
    image = {"type": "input_image", "image_url": "https://example.com/a.png", "detail": "auto"}
    assert out == [
        {"type": "message", "role": "user", "content": [
            {"type": "input_text", "text": "look"}, image]},
        {"type": "reasoning", "id": "rs_a", "encrypted_content": "enc",
         "summary": [{"type": "summary_text", "text": "plan"},
                     {"type": "summary_text", "text": "then look"}]},
        {"type": "message", "role": "assistant", "content": "Looking."},
        {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": '{"cmd":"ls"}'},
        {"type": "message", "role": "assistant", "content": "And:"},
        {"type": "function_call", "call_id": "c2", "name": "shot", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "c1", "output": "a.txt"},
        {"type": "function_call_output", "call_id": "c2", "output": [
            {"type": "input_text", "text": "x"}, image]},
        {"type": "message", "role": "user", "content": "go on"},  # one text: a string
    ]
    check_responses(out)
    assert [i["type"] for i in to_openai_responses(history, reasoning=False)].count(
        "reasoning") == 0


def test_a_recorded_reasoning_item_keeps_its_id_and_encrypted_content() -> None:
    block = {"type": "reasoning", "text": "t", "id": "rs_abc", "encryptedContent": "enc"}
    out = to_openai_responses([v.Message(role="assistant", content=(block,))])  # type: ignore[arg-type]
    assert out == [{"type": "reasoning", "id": "rs_abc", "encrypted_content": "enc",
                    "summary": [{"type": "summary_text", "text": "t"}]}]
    check_responses(out)
    # An item with no summary (none asked for) goes back with none, not an empty text.
    empty = v.ReasoningBlock(text="", id="rs_e", encrypted_content="enc")
    assert to_openai_responses([v.Message(role="assistant", content=(empty,))]) == [
        {"type": "reasoning", "id": "rs_e", "summary": [], "encrypted_content": "enc"}]


def test_two_items_of_one_message_stay_two_and_anthropic_thinking_is_left_out() -> None:
    content = (v.ReasoningBlock(text="a", id="rs_1"), v.ReasoningBlock(text="b", id="rs_2"),
               v.ReasoningBlock(text="c", signature="sig"),
               v.ReasoningBlock(text="", redacted_data="opaque"))
    out = to_openai_responses([v.Message(role="assistant", content=content)])
    assert [(i["id"], [p["text"] for p in i["summary"]]) for i in out] == [
        ("rs_1", ["a"]), ("rs_2", ["b"])]
    check_responses(out)
