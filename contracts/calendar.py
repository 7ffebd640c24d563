"""What a contract's calendar means, day by day: one definition for the generator and the auditor.

Activity on a day is the nominal level times the calendar's level of that day: the weekday's factor
(`weekly[wd]`) times the month's (`monthly[m]`) times the factors of the holidays and events covering the
day. Multiplying, not adding: a unit that is busy on weekdays is busy in proportion on a Sunday at a tenth
of the volume, as real operations are. A day is closed for everyone when its weekday, its month or one of
its dates has a factor of 0.
"""

from __future__ import annotations

import datetime as dt
import functools
from calendar import monthrange

import numpy as np

from contracts.model import WEEKDAYS, Calendar, DateEffect


def dates(start: str, periods: int) -> list[dt.date]:
    return list(_dates(start, periods))


# The generator and the auditor ask for the same timeline's days many times per world: built once each.
@functools.lru_cache(maxsize=16)
def _dates(start: str, periods: int) -> tuple[dt.date, ...]:
    first = dt.date.fromisoformat(start)
    return tuple(first + dt.timedelta(days=int(d)) for d in range(periods))


@functools.lru_cache(maxsize=16)
def _day_index(start: str, periods: int) -> dict[dt.date, int]:  # read only
    return {d: i for i, d in enumerate(_dates(start, periods))}


@functools.lru_cache(maxsize=16)
def _months(start: str, periods: int) -> np.ndarray:
    out = np.array([d.month - 1 for d in _dates(start, periods)], dtype=np.int64)
    out.flags.writeable = False
    return out


def weekdays(start: str, periods: int) -> np.ndarray:
    """0 = Monday ... 6 = Sunday, per day of the timeline."""
    first = dt.date.fromisoformat(start).weekday()
    return (first + np.arange(periods)) % 7


def months(start: str, periods: int) -> np.ndarray:
    """0 = January ... 11 = December, per day of the timeline."""
    return _months(start, periods).copy()


def days_of_year(start: str, periods: int) -> np.ndarray:
    """1 = January 1st ... 366, per day of the timeline (floats)."""
    return _days_of_year(start, periods).copy()


@functools.lru_cache(maxsize=16)
def _days_of_year(start: str, periods: int) -> np.ndarray:
    out = np.array([d.timetuple().tm_yday for d in _dates(start, periods)], dtype=float)
    out.flags.writeable = False
    return out


def easter(year: int) -> dt.date:
    """Western (Gregorian) Easter Sunday: the anonymous Gregorian algorithm (Meeus/Jones/Butcher)."""
    a, b, c = year % 19, year // 100, year % 100
    d, e = divmod(b, 4)
    g = (8 * b + 13) // 25
    h = (19 * a + b - d - g + 15) % 30
    i, k = divmod(c, 4)
    weekday_shift = (32 + 2 * e + 2 * i - h - k) % 7
    m = (a + 11 * h + 19 * weekday_shift) // 433
    month = (h + weekday_shift - 7 * m + 90) // 25
    return dt.date(year, month, (h + weekday_shift - 7 * m + 33 * month + 19) % 32)


def resolve(effect: DateEffect, year: int) -> dt.date:
    """The first day an effect covers in a given year (MM-DD, the n-th weekday of the month, or Easter)."""
    if effect.date == "easter":
        return easter(year) + dt.timedelta(days=effect.offset)
    month, rest = int(effect.date[:2]), effect.date[3:]
    if rest.isdigit():
        day = dt.date(year, month, min(int(rest), monthrange(year, month)[1]))
    else:
        weekday, n = WEEKDAYS.index(rest[:3]), int(rest[3])
        first = dt.date(year, month, 1)
        day = first + dt.timedelta(days=(weekday - first.weekday()) % 7 + 7 * (n - 1))
        if day.month != month:  # a fifth weekday the month does not have: the last one instead
            day -= dt.timedelta(days=7)
    return day + dt.timedelta(days=effect.offset)


def date_factors(calendar: Calendar, start: str, periods: int) -> np.ndarray:
    """The product of the dated effects' factors on each day (1 where no holiday or event falls)."""
    days, index = _dates(start, periods), _day_index(start, periods)
    factors = np.ones(periods)
    for effect in calendar.dates:
        for year in range(days[0].year, days[-1].year + 1):
            first = resolve(effect, year)
            for k in range(effect.days):
                i = index.get(first + dt.timedelta(days=k))
                if i is not None:
                    factors[i] *= effect.factor
    return factors


def levels(calendar: Calendar, start: str, periods: int) -> np.ndarray:
    """The calendar's activity level per day relative to the nominal level (0 on a closed day)."""
    weekly = np.asarray(calendar.weekly)[weekdays(start, periods)]
    monthly = np.asarray(calendar.monthly)[months(start, periods)]
    return weekly * monthly * date_factors(calendar, start, periods)


def open_for_all(calendar: Calendar, start: str, periods: int) -> np.ndarray:
    """Days every unit keeps open as far as the calendar goes (its weekday, month and dates allow it)."""
    weekly = np.asarray(calendar.weekly)[weekdays(start, periods)] > 0
    monthly = np.asarray(calendar.monthly)[months(start, periods)] > 0
    return weekly & monthly & (date_factors(calendar, start, periods) > 0)
