"""The generated product catalogue: sixteen product types with attributes, descriptions and Q&A; devices come before
their accessories, so an accessory's compatibility attributes name devices of the same shop."""

from __future__ import annotations

import random
import string
from typing import Any, Callable

__all__ = ["PRODUCT_TYPES", "TYPE_SYNONYMS", "make_catalog", "new_product_id"]

COLOURS = ["Black", "Midnight Blue", "Graphite", "Silver", "Forest Green", "Sand", "Crimson", "White", "Slate Gray"]
TIRE_SIZES = ["205/55R16", "215/60R16", "225/65R17", "235/65R18", "245/60R18", "265/70R17", "225/45R17"]
PHONES = {"Lumen 14": 6.1, "Lumen 14 Pro": 6.3, "Galaxia S9": 6.2, "Galaxia S9 Ultra": 6.8, "Zentek Z5": 6.5,
          "Pixelon 8a": 6.1}
POD_FORMATS = ["BrewDisc", "PodPress", "K-style"]
Gen = Callable[[random.Random, dict[str, Any]], dict[str, Any]]


def new_product_id(rng: random.Random, taken: set[str]) -> str:
    """A fresh 10-character upper-case alphanumeric id (like ``J6FLBNBQ31``)."""
    while True:
        pid = "".join(rng.choice(string.ascii_uppercase + string.digits) for _ in range(10))
        if pid not in taken and not pid.isdigit():
            taken.add(pid)
            return pid


def _p(title: str, brand: str, attrs: dict[str, Any], desc: list[str], qna: list[tuple[str, str]], price: float,
       keywords: list[str]) -> dict[str, Any]:
    return {"title": title, "brand": brand, "attributes": attrs, "description": " ".join(desc),
            "qna": [{"question": q, "answer": a} for q, a in qna], "price": round(price, 2), "keywords": keywords}


def _tire(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    brand = rng.choice(["Meridian", "Stonecrest", "Vantera", "Roadwise", "Kestrel"])
    line, season, vehicles, depth = rng.choice([
        ("TrailGuard LTX", "all-season", "SUVs and Crossovers", (10, 12)),
        ("CityGlide Touring", "all-season", "Passenger Cars", (9, 11)),
        ("Summit A/T", "all-terrain", "Light Trucks and SUVs", (14, 17)),
        ("FrostBite X", "winter", "Cars and SUVs", (11, 13)),
        ("Apex Sport", "summer", "Performance Cars", (8, 10))])
    size, n32 = rng.choice(TIRE_SIZES), rng.randint(*depth)
    if not ctx.get("tire_sizes"):  # the first one is like the paper's all-season SUV tire, 235/65R18
        line, season, vehicles, size, n32 = "TrailGuard LTX", "all-season", "SUVs and Crossovers", "235/65R18", 11
    load, speed, miles = rng.randint(91, 112), rng.choice("THV"), rng.choice([40, 50, 60, 70, 80]) * 1000
    ctx.setdefault("tire_sizes", []).append(size)
    td = f"{n32}/32 in ({n32 / 32:.2f} in)"
    snow = {"winter": "Yes, it is a dedicated winter tire with a severe-snow rating.",
            "summer": "No, it is a summer tire and should not be used below about 45°F or in snow.",
            }.get(season, "It handles light snow, but a dedicated winter tire is better for heavy snow and ice.")
    article = "an" if season[0] in "aeiou" else "a"
    return _p(f"{brand} {line} {season.title()} Radial Tire for {vehicles}, {size} {load}{speed}", brand,
              {"tire_size": size, "load_index": load, "speed_rating": speed, "season": season, "tread_depth": td,
               "treadwear_warranty": f"{miles:,} miles", "vehicle_type": vehicles},
              [f"The {brand} {line} is {article} {season} radial tire made for {vehicles.lower()}.",
               rng.choice(["Wide circumferential grooves push water out of the contact patch to resist hydroplaning.",
                           "A silica-rich compound keeps the tread flexible for grip on cold, wet pavement.",
                           "Variable-pitch tread blocks keep road noise low on the highway."]),
               f"New tires have a tread depth of {td}.", f"It carries a {miles:,}-mile treadwear limited warranty."],
              [("What is the tread depth of this tire?", f"New, the tread is {td} deep."),
               (f"Is this the {size} size?",
                f"Yes, this listing is size {size} with load index {load} and speed rating {speed}."),
               ("How long is the mileage warranty?", f"The manufacturer covers {miles:,} miles of treadwear."),
               ("Is this tire good in snow?", snow)],
              rng.uniform(95, 260), ["tire", "tires", "car tire", season, size])


def _tire_chains(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    brand, model = rng.choice(["GripLink", "Polar Track", "Northbound"]), f"Z-Grip {rng.choice([100, 200, 300])}"
    sizes = sorted(set(rng.sample(TIRE_SIZES, 3) + [rng.choice(ctx.get("tire_sizes") or TIRE_SIZES)]))
    return _p(f"{brand} {model} Snow Tire Chains, 1 Pair, fits {', '.join(sizes)}", brand,
              {"tire_sizes": sizes, "material": "hardened manganese alloy steel", "link_thickness": "7 mm",
               "quantity": "2 chains (one pair)"},
              [f"These {brand} chains add traction on packed snow and ice.",
               "A self-tightening cam system removes the need to re-tension after the first mile.",
               f"They fit tire sizes {', '.join(sizes)}."],
              [("Will these fit my tires?", f"They are sized for {', '.join(sizes)}."),
               ("How fast can I drive with them on?", "Keep below 30 mph with chains mounted.")],
              rng.uniform(45, 120), ["tire chains", "snow chains", "chains"])


def _sheet_pan(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    brand = rng.choice(["Hearthline", "Bakewell & Co", "Copperleaf", "Nordhaven Kitchen"])
    name, dims = rng.choice([("Quarter", "9 x 13 in"), ("Half", "13 x 18 in"), ("Jelly Roll", "10.5 x 15.5 in"),
                             ("Full", "18 x 26 in")])
    material, colour, temp, dish = rng.choice([
        ("natural aluminum", "Silver", 600, False), ("aluminized steel", "Gold", 500, False),
        ("nonstick carbon steel", "Charcoal", 450, True), ("stainless steel", "Silver", 600, True)])
    pack = rng.choice([1, 1, 2, 3])
    plural, packs = ("s", f", {pack}-Pack") if pack > 1 else ("", "")
    size = name.lower() + ("" if name == "Jelly Roll" else " sheet")
    return _p(f"{brand} {name} Sheet Pan{plural}, {material.title()} Baking Sheet{plural}{packs}, {dims}", brand,
              {"size": size, "dimensions": dims, "material": material, "colour": colour, "oven_safe_to": f"{temp}°F",
               "dishwasher_safe": "yes" if dish else "no, hand wash", "pack_count": pack},
              [f"A {size} pan in {material} with a rolled rim that resists warping.", f"It is oven safe to {temp}°F.",
               rng.choice(["Great for roasting vegetables, cookies and sheet-pan dinners.",
                           "The even heat gives uniform browning."]),
               "Dishwasher safe." if dish else "Hand wash to keep the finish."],
              [("What are the dimensions?", f"The pan measures {dims}."),
               ("Is it dishwasher safe?", "Yes." if dish else "No, hand wash only."),
               ("What temperature can it go to?", f"It is rated oven safe to {temp}°F."),
               ("What is it made of?", f"It is {material}.")],
              rng.uniform(12, 45) * (1 + 0.6 * (pack - 1)), ["sheet pan", "baking sheet", "bakeware", "pan"])


def _chocolate(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    brand = rng.choice(["Cocoa Grove", "Halvorsen", "Maison Brune", "Sweet Harbor"])
    kind, cocoa = rng.choice([("Milk", "35%"), ("Dark", "70%"), ("Extra Dark", "85%"), ("White", "28% cocoa butter")])
    form = rng.choice(["Coins", "Bar", "Truffles", "Bark", "Squares"])
    oz, nut_free = rng.choice([3.5, 8, 12, 16]), rng.random() < 0.5
    if not ctx.get("chocolate"):  # the first one is the paper's nut-free chocolate coins
        form, nut_free = "Coins", True
    ctx["chocolate"] = True
    nuts = ("Yes, made in a dedicated nut-free facility" if nut_free
            else "No, made on shared equipment with almonds and hazelnuts")
    title = f"{brand} {'Nut-Free ' if nut_free else ''}{kind} Chocolate {form}, {oz} oz"
    return _p(title, brand,
              {"chocolate_type": kind.lower(), "cocoa_content": cocoa, "form": form.lower(), "net_weight": f"{oz} oz",
               "nut_free": nuts, "allergens": "milk, soy" + ("" if nut_free else ", tree nuts"),
               "gluten_free": rng.choice(["yes", "no"])},
              [f"{kind} chocolate {form.lower()} with {cocoa} cocoa.",
               "Foil-wrapped and individually sealed." if form == "Coins" else "Sealed for freshness.",
               "Nut-free and safe for school parties." if nut_free else "May contain tree nuts."],
              [("Is this nut free?", nuts + "."), ("How much is in the package?", f"Each package holds {oz} oz."),
               ("Will it melt during shipping?", "Warm-weather orders ship with a cold pack.")],
              rng.uniform(4, 28), ["chocolate", "candy", form.lower(), kind.lower()])


def _phone(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    model = rng.choice(sorted(PHONES))
    brand, screen = model.split()[0], PHONES[model]
    storage, ram, colour = rng.choice([128, 256, 512]), rng.choice([6, 8, 12]), rng.choice(COLOURS)
    wireless = model != "Pixelon 8a"
    ctx.setdefault("phones", {})[model] = wireless
    return _p(f"{model} 5G Smartphone, {storage}GB, {screen}-inch OLED Display, {colour}, Unlocked", brand,
              {"model": model, "storage": f"{storage} GB", "memory": f"{ram} GB RAM", "screen_size": f"{screen} in",
               "colour": colour, "connector": "USB-C", "wireless_charging": "yes" if wireless else "no",
               "battery": f"{rng.choice([4000, 4500, 5000])} mAh"},
              [f"The {model} pairs a {screen}-inch OLED screen with {storage} GB of storage.",
               "Unlocked for all major carriers.",
               "Supports wireless charging." if wireless else "Charges over USB-C (no wireless charging)."],
              [("How much storage does it have?", f"{storage} GB, with {ram} GB of RAM."),
               ("Is it unlocked?", "Yes, it works on any 5G carrier."),
               ("Does it support wireless charging?", "Yes." if wireless else "No, only wired USB-C charging.")],
              rng.uniform(299, 1199), ["phone", "smartphone", "cell phone", model.lower()])


def _phone_case(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    brand = rng.choice(["ArmorShell", "Koda", "Slimfit Studio", "Tern & Tide"])
    model = _next_model(rng, ctx, "phones", ctx.get("phones") or PHONES)
    style, material = rng.choice([("Liquid Silicone", "silicone"), ("Clear", "TPU"), ("Leather", "genuine leather"),
                                  ("Rugged", "polycarbonate and TPU")])
    drop, colour = rng.choice([6, 8, 10, 12]), rng.choice(COLOURS)
    return _p(f"{brand} {style} Case for {model}, {drop} ft Drop Protection, {colour}", brand,
              {"compatible_with": [model], "material": material, "colour": colour, "drop_protection": f"{drop} ft",
               "wireless_charging_compatible": "yes"},
              [f"A slim {material} case cut precisely for the {model}.",
               f"Raised edges and corners are tested for {drop}-foot drops.",
               "Works with wireless chargers without removing the case."],
              [("Which phone does this fit?", f"Only the {model}."), ("Can I charge wirelessly with it on?", "Yes.")],
              rng.uniform(9, 49), ["phone case", "case", "cover", model.lower()])


def _charger(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    brand = rng.choice(["Voltaic", "ChargeCraft", "Ampere Lane"])
    kind, watts = rng.choice([("USB-C Wall Charger", 30), ("Wireless Charging Pad", 15), ("Dual-Port Car Charger", 45),
                              ("USB-C Fast Charging Cable, 6 ft", 60)])
    wireless = "Wireless" in kind
    phones = ctx.get("phones") or {m: True for m in PHONES}
    pool = sorted(m for m, w in phones.items() if w or not wireless) or sorted(PHONES)
    models = sorted(rng.sample(pool, min(len(pool), rng.randint(2, 4))))
    fits = ", ".join(models)
    return _p(f"{brand} {watts}W {kind}, Compatible with {fits}", brand,
              {"compatible_with": models, "wattage": f"{watts} W", "connector": "Qi wireless" if wireless else "USB-C",
               "colour": rng.choice(["Black", "White"])},
              [f"Delivers up to {watts} W.", f"Tested with the {fits}.", "Over-heat and over-current protection built in."],
              [("Will it charge my phone fast?", f"It delivers up to {watts} W to the {fits}."),
               ("Does it come with a cable?",
                "It is the cable." if kind.endswith("ft") else "Yes, a 3 ft cable is included.")],
              rng.uniform(12, 45), ["charger", "charging", "cable" if "Cable" in kind else "adapter"])


def _shoes(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    brand = rng.choice(["Stride Labs", "Northtrail", "Pacer", "Velo Athletic"])
    name = rng.choice(["Cloudline 3", "Tempo Racer", "Ridgeback", "Glide 9"])
    gender, terrain, colour = rng.choice(["Men's", "Women's"]), rng.choice(["road", "trail"]), rng.choice(COLOURS)
    drop, weight = rng.choice([4, 6, 8, 10]), rng.choice([7.8, 8.6, 9.4, 10.2])
    fit = rng.choice(["true to size", "about half a size small"])
    sizes = "7-13" if gender == "Men's" else "5-11"
    return _p(f"{brand} {gender} {name} {terrain.title()} Running Shoes, {colour}", brand,
              {"sizes": sizes, "width": rng.choice(["regular", "regular and wide"]), "heel_to_toe_drop": f"{drop} mm",
               "weight": f"{weight} oz", "upper": "engineered mesh", "colour": colour, "terrain": terrain, "fit": fit},
              [f"A {terrain} running shoe with a {drop} mm heel-to-toe drop.",
               "The breathable engineered-mesh upper keeps feet cool.",
               "Lugged outsole for loose dirt." if terrain == "trail" else "A responsive foam midsole for daily miles."],
              [("Do these run true to size?", f"Most runners find them {fit}."), ("What is the drop?", f"{drop} mm."),
               ("How much do they weigh?", f"About {weight} oz per shoe.")],
              rng.uniform(70, 170), ["running shoes", "shoes", "sneakers", terrain])


def _coffee_maker(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    brand = rng.choice(["Brewhaus", "Morning Ritual", "Kettlebrook"])
    kind, capacity = rng.choice([("12-Cup Programmable Drip Coffee Maker", "12 cups"),
                                 ("Single-Serve Pod Coffee Maker", "1 cup (6-12 oz)"),
                                 ("15-Bar Espresso Machine with Milk Frother", "1.5 L water tank")])
    model = f"{brand.split()[0][:2].upper()}-{rng.randint(100, 999)}"
    colour = rng.choice(["Black", "Stainless", "White", "Red"])
    attrs = {"model": model, "type": kind.split(" Coffee")[0].lower(), "capacity": capacity, "colour": colour,
             "wattage": f"{rng.choice([900, 1100, 1350])} W",
             "dimensions": f"{rng.randint(8, 12)} x {rng.randint(7, 11)} x {rng.randint(11, 15)} in"}
    qna = [("How many cups does it make?", f"Its capacity is {capacity}."), ("What colour is it?", colour)]
    if "Pod" in kind:
        attrs["pod_format"] = rng.choice(POD_FORMATS)
        ctx.setdefault("pod_formats", []).append(attrs["pod_format"])
        qna.append(("What pods does it take?", f"It brews {attrs['pod_format']} pods."))
    return _p(f"{brand} {model} {kind}, {colour}", brand, attrs,
              [f"The {brand} {model} is a {attrs['type']} machine.", f"Capacity: {capacity}.",
               "Auto shut-off after two hours."], qna,
              rng.uniform(39, 299), ["coffee maker", "coffee machine", "espresso" if "Espresso" in kind else "brewer"])


def _coffee_pods(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    brand = rng.choice(["Highland Roasters", "Ember Bean", "Daybreak Coffee Co"])
    blend = rng.choice(["Breakfast Blend", "Colombian", "French Roast", "Hazelnut", "Decaf House Blend"])
    fmt, count = rng.choice(ctx.get("pod_formats") or POD_FORMATS), rng.choice([12, 24, 48, 72])
    roast = "dark" if "French" in blend else rng.choice(["light", "medium"])
    return _p(f"{brand} {blend} {roast.title()} Roast Coffee Pods, {count} Count, for {fmt} Brewers", brand,
              {"pod_format": fmt, "roast": roast, "count": count, "caffeinated": "no" if "Decaf" in blend else "yes"},
              [f"{blend} in recyclable {fmt} pods.", f"A {roast} roast.", f"{count} pods per box."],
              [("Will these work in my machine?", f"They fit brewers that take {fmt} pods."),
               ("How many pods are there?", f"{count}.")],
              rng.uniform(9, 45), ["coffee pods", "coffee", "pods", blend.lower()])


def _laptop(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    brand, line = rng.choice(["Arcbook", "Vireo", "Tessera"]), rng.choice(["Air", "Pro", "Studio", "Go"])
    screen, ram = rng.choice([13.3, 14, 15.6, 16, 17.3]), rng.choice([8, 16, 32])
    ssd, colour = rng.choice(["256GB", "512GB", "1TB"]), rng.choice(["Silver", "Graphite", "Midnight Blue"])
    model = f"{brand} {line} {int(screen)}"
    return _p(f"{brand} {line} {screen}-inch Laptop, {ram}GB RAM, {ssd} SSD, {colour}", brand,
              {"model": model, "screen_size": f"{screen} in", "memory": f"{ram} GB", "storage": f"{ssd} SSD",
               "colour": colour, "weight": f"{round(2.4 + (screen - 13) * 0.5, 1)} lb"},
              [f"A {screen}-inch laptop with {ram} GB of memory and a {ssd} SSD.",
               "Backlit keyboard and all-day battery."],
              [("How big is the screen?", f"{screen} inches diagonal."), ("How much RAM?", f"{ram} GB.")],
              rng.uniform(499, 1899), ["laptop", "notebook", "computer"])


def _laptop_bag(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    brand = rng.choice(["Commuter Co", "Fieldstone", "Urban Nomad"])
    style = rng.choice(["Backpack", "Messenger Bag", "Sleeve", "Briefcase"])
    fits, material = rng.choice([13.3, 14, 15.6, 16, 17.3]), rng.choice(["nylon", "waxed canvas", "recycled polyester"])
    colour = rng.choice(COLOURS)
    return _p(f"{brand} Laptop {style} for Laptops up to {fits} Inches, {material.title()}, {colour}", brand,
              {"fits_laptops_up_to": f"{fits} in", "material": material, "colour": colour,
               "water_resistant": rng.choice(["yes", "no"])},
              [f"A padded {style.lower()} for laptops up to {fits} inches.", f"Made of {material}."],
              [("Will a 15.6-inch laptop fit?", "Yes." if fits >= 15.6 else f"No, it fits laptops up to {fits} inches."),
               ("Is it waterproof?", "It is water resistant, not waterproof.")],
              rng.uniform(25, 140), ["laptop bag", "bag", style.lower()])


def _printer(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    brand, series = rng.choice([("Pressmark", "JetOffice"), ("Inkwell", "HomeJet"), ("Printara", "ColorPro")])
    model = f"{brand} {series} {rng.choice([3630, 4650, 5255, 6978, 8025])}"
    kind = rng.choice(["All-in-One Inkjet", "Wireless Inkjet"])
    ink = str(rng.choice([62, 64, 67, 910]))
    ctx.setdefault("printers", []).append(model)
    return _p(f"{model} {kind} Printer, Print Scan Copy, Wi-Fi", brand,
              {"model": model, "type": kind.lower(), "ink_series": ink, "wireless": "yes",
               "print_speed": f"{rng.randint(8, 22)} ppm"},
              [f"The {model} prints, scans and copies over Wi-Fi.", "Automatic two-sided printing."],
              [("Does it print wirelessly?", "Yes, over Wi-Fi and from phones."),
               ("Which ink does it use?", f"Series {ink} cartridges (black and tri-color).")],
              rng.uniform(79, 249), ["printer", "inkjet printer", model.lower()])


def _ink(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    models = ctx.get("printers") or ["Pressmark JetOffice 4650"]
    base = _next_model(rng, ctx, "printers", models)
    same = sorted({m for m in models if m.split()[0] == base.split()[0] and m != base})
    fits = sorted({base, *rng.sample(same, min(len(same), rng.randint(0, 2)))})
    brand = base.split()[0] if rng.random() < 0.6 else "Refillia"
    colour = rng.choice(["Black", "Tri-Color", "Black & Tri-Color Combo"])
    return _p(f"{brand} {colour} Ink Cartridge, Works with {', '.join(fits)}", brand,
              {"compatible_with": fits, "colour": colour.lower(),
               "page_yield": f"{rng.choice([120, 200, 300, 480])} pages",
               "genuine": "yes" if brand != "Refillia" else "no, remanufactured"},
              [f"{colour} ink for the {', '.join(fits)}.", "Fade-resistant prints."],
              [("Will this work in my printer?", f"It is made for the {', '.join(fits)}.")],
              rng.uniform(15, 60), ["ink", "ink cartridge", "cartridge", "printer ink"])


def _camera(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    model, battery = rng.choice([("Orion M50", "OB-12"), ("Orion M6", "OB-12"), ("Lensa Z30", "EN-25"),
                                 ("Kairo XT4", "NP-W126")])
    mp, colour = rng.choice([20, 24, 26, 33]), rng.choice(["Black", "Silver"])
    ctx.setdefault("cameras", {})[model] = battery
    return _p(f"{model} Mirrorless Camera with 15-45mm Lens, {mp}MP, 4K Video, {colour}", model.split()[0],
              {"model": model, "sensor": f"{mp} MP APS-C", "battery_type": battery, "video": "4K 30p", "colour": colour},
              [f"A {mp}-megapixel mirrorless camera with a 15-45 mm kit lens.",
               f"Uses the {battery} rechargeable battery."],
              [("What battery does it use?", f"The {battery} lithium-ion battery."),
               ("Does it shoot 4K?", "Yes, 4K at 30 fps.")],
              rng.uniform(499, 1299), ["camera", "mirrorless camera", model.lower()])


def _camera_battery(rng: random.Random, ctx: dict[str, Any]) -> dict[str, Any]:
    cams = ctx.get("cameras") or {"Orion M50": "OB-12"}
    code = cams[_next_model(rng, ctx, "cameras", sorted(cams))]
    fits = sorted(m for m, b in cams.items() if b == code)
    brand, mah = rng.choice(["PowerCell", "Voltrix"]), rng.choice([875, 1040, 1260])
    return _p(f"{brand} {code} Rechargeable Battery, 2-Pack, for {', '.join(fits)}", brand,
              {"compatible_with": fits, "battery_type": code, "capacity": f"{mah} mAh", "pack_count": 2},
              [f"Two {mah} mAh {code} batteries.", f"Fits the {', '.join(fits)}."],
              [("Will it fit my camera?", f"It replaces the {code} battery in the {', '.join(fits)}.")],
              rng.uniform(19, 49), ["battery", "camera battery", code.lower()])


def _next_model(rng: random.Random, ctx: dict[str, Any], key: str, pool: Any) -> str:
    """Accessories cycle through the shop's devices first, so every device gets at least one accessory."""
    names = sorted(pool)
    used = ctx.setdefault(f"_cycle_{key}", [])
    left = [m for m in names if m not in used] or names
    pick = rng.choice(left)
    used.append(pick)
    return pick


# product_type -> (department, generator, synonyms); devices first: accessories refer to them.
PRODUCT_TYPES: dict[str, tuple[str, Gen, tuple[str, ...]]] = {
    "smartphones": ("Cell Phones & Accessories", _phone, ("phone", "cell phone", "mobile phone")),
    "laptops": ("Computers", _laptop, ("laptop", "notebook", "computer")),
    "printers": ("Office Products", _printer, ("printer",)),
    "cameras": ("Camera & Photo", _camera, ("camera", "mirrorless camera")),
    "coffee makers": ("Kitchen", _coffee_maker, ("coffee maker", "coffee machine", "espresso machine", "brewer")),
    "tires": ("Automotive", _tire, ("tire", "tyre", "car tire")),
    "phone cases": ("Cell Phones & Accessories", _phone_case, ("phone case", "case", "cover")),
    "chargers": ("Cell Phones & Accessories", _charger,
                 ("charger", "charging cable", "power adapter", "wireless charger")),
    "laptop bags": ("Computers", _laptop_bag, ("laptop bag", "backpack", "laptop sleeve", "bag")),
    "ink cartridges": ("Office Products", _ink, ("ink", "ink cartridge", "cartridge", "printer ink")),
    "camera batteries": ("Camera & Photo", _camera_battery, ("battery", "camera battery")),
    "coffee pods": ("Grocery", _coffee_pods, ("coffee pod", "pod", "k-cup", "capsule")),
    "tire chains": ("Automotive", _tire_chains, ("snow chain", "tire chain", "chain")),
    "sheet pans": ("Kitchen", _sheet_pan, ("sheet pan", "baking sheet", "baking pan", "pan")),
    "chocolate": ("Grocery", _chocolate, ("chocolate", "chocolate coin", "candy")),
    "running shoes": ("Sports & Outdoors", _shoes, ("running shoe", "shoe", "sneaker")),
}
TYPE_SYNONYMS = {t: syn for t, (_, _, syn) in PRODUCT_TYPES.items()}


def make_catalog(rng: random.Random, n_products: int) -> list[dict[str, Any]]:
    """``n_products`` products spread evenly over the product types (devices generated first)."""
    types = list(PRODUCT_TYPES)
    one_more = set(rng.sample(types, n_products % len(types)))
    ctx: dict[str, Any] = {}
    taken: set[str] = set()
    out = []
    for t, (dept, gen, _) in PRODUCT_TYPES.items():
        for _ in range(n_products // len(types) + (t in one_more)):
            p = gen(rng, ctx)
            out.append({"product_id": new_product_id(rng, taken), "category": dept, "product_type": t, **p})
    return out
