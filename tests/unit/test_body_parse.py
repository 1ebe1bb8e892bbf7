"""`body.parse_json`: the stdlib parser, refusing only the numbers JSON cannot carry back."""

from __future__ import annotations

import pytest
from fastapi.exceptions import RequestValidationError

from reme_service.server.body import parse_json


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"q": "NaN and Infinity are words here"}', {"q": "NaN and Infinity are words here"}),
        ('{"q": "release e400 of 1e400"}', {"q": "release e400 of 1e400"}),  # an exponent inside a string
        ('{"x": 1.5e308, "y": 1e-400, "z": -2E+99}', {"x": 1.5e308, "y": 0.0, "z": -2e99}),  # finite
        ('{"n": 12345678901234567890}', {"n": 12345678901234567890}),
    ],
)
def test_json_values_are_read(text: str, value: object) -> None:
    assert parse_json(text.encode()) == value


@pytest.mark.parametrize(
    "number", ["NaN", "Infinity", "-Infinity", "1e400", "-1E+400", "9.9e999", "1" + "0" * 400 + ".0", "9" * 300 + "e99"]
)
def test_numbers_json_cannot_carry_are_refused(number: str) -> None:
    with pytest.raises(RequestValidationError) as caught:
        parse_json(f'{{"text": "fine", "x": [1, {number}]}}'.encode())
    assert caught.value.errors()[0]["type"] == "json_invalid"
