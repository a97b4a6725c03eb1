"""FuRePA's steps (mask_reasoning, propose, assess_plan, repetition_control, retrieve, the fallback answer), one module each."""
