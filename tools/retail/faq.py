"""The shop's help-centre articles (written for this project): what ``customer_support`` searches."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["FAQ", "faq_entries"]

FAQ: list[tuple[str, str, str]] = [
    ("returns", "How long do I have to return an item?",
     "Most items can be returned within 30 days of delivery. Electronics such as phones, laptops and cameras have a 15-day "
     "window, and opened grocery items cannot be returned."),
    ("returns", "How do I start a return?",
     "Open Your Orders, choose the order, select Return or replace items, pick a reason and print the prepaid label or show "
     "the QR code at a drop-off point."),
    ("returns", "When will I get my refund?",
     "Refunds are issued once the carrier scans your return. Card refunds take 3 to 5 business days to appear; gift card "
     "refunds are immediate."),
    ("returns", "Do I have to pay for return shipping?",
     "Returns are free when the item is damaged, defective or not as described. For other reasons a flat return shipping fee "
     "of $5.99 is taken from the refund, unless you drop it off at a partner store."),
    ("returns", "My item arrived damaged or broken. What should I do?",
     "Request a replacement or refund from Your Orders within 30 days and choose 'Arrived damaged'. You do not need to send "
     "back items under $15; for others we email a free return label."),
    ("returns", "I received the wrong item.",
     "Choose 'Wrong item was sent' when starting the return. We ship the correct item right away and the return label is free."),
    ("returns", "Which items cannot be returned?",
     "Opened food and beverages, gift cards, downloadable software and personalised products cannot be returned. Tires that "
     "have been mounted cannot be returned either."),
    ("returns", "Can I exchange an item for a different size or colour?",
     "Yes. Start a return, choose 'Exchange' and pick the new size or colour; the replacement ships as soon as you drop off the "
     "original."),
    ("orders", "How do I cancel an order?",
     "Open Your Orders and select Cancel items. Orders can be cancelled until they enter the shipping process; after that, "
     "refuse the delivery or return the item."),
    ("orders", "Can I change the shipping address of an order?",
     "You can change the address in Your Orders until the order ships. Once shipped, the carrier may allow a redirect from its "
     "tracking page."),
    ("orders", "How do I track my package?",
     "Your Orders shows each shipment's carrier, tracking number, status and estimated delivery time. Select Track package for "
     "the carrier's scan history."),
    ("orders", "My package says delivered but I cannot find it.",
     "Check around the delivery location and with neighbours, and wait until the end of the day, since carriers sometimes mark "
     "packages early. If it has not appeared after 48 hours, contact us and we will refund or replace it."),
    ("orders", "Why is my package late?",
     "Weather, carrier volume or address problems can delay shipments. The tracking page shows the latest estimate; if the "
     "package is more than 3 days past its estimated delivery we refund shipping fees or replace the item."),
    ("orders", "Why did my order arrive in several boxes?",
     "Items ship from different warehouses as soon as they are available, so one order can arrive in separate packages on "
     "different days."),
    ("subscribe & save", "What is Subscribe & Save?",
     "Subscribe & Save delivers everyday items such as coffee pods or snacks on a schedule you choose and takes 5% off each "
     "delivery, or 15% when five or more subscriptions arrive together."),
    ("subscribe & save", "How do I cancel all my Subscribe & Save items?",
     "Go to Your Account, open Subscribe & Save, select each subscription and choose Cancel subscription; there is no single "
     "button for all items. Cancelling is free and takes effect before the next delivery."),
    ("subscribe & save", "How do I skip a Subscribe & Save delivery?",
     "In Subscribe & Save, pick the upcoming delivery and select Skip. You can skip as many deliveries as you like."),
    ("subscribe & save", "How do I change how often a subscription is delivered?",
     "Open the subscription and change its frequency, anywhere from every 2 weeks to every 6 months."),
    ("payment", "Which payment methods do you accept?",
     "We accept Visa, Mastercard, American Express and Discover cards, debit cards, gift cards, PayPal and bank transfers."),
    ("payment", "Why was my payment declined?",
     "Declines usually come from an expired card, a billing address that does not match the bank's records or a bank fraud "
     "check. Update the card in Your Payments or contact your bank, then retry the order within 3 days."),
    ("payment", "How do I update or remove a saved card?",
     "Go to Your Account, then Your Payments, and edit or delete the card. A card used by an open order or subscription can "
     "only be removed after you pick another."),
    ("payment", "Can I pay in monthly installments?",
     "Orders over $150 can be split into 4 interest-free payments at checkout with the Pay in 4 option."),
    ("payment", "How do I redeem a gift card?",
     "Enter the claim code under Your Account, Gift Cards. The balance is applied to eligible orders automatically."),
    ("payment", "Do you offer price adjustments if the price drops?",
     "We do not adjust prices after purchase, but you can return an unopened item within the return window and buy it again "
     "at the lower price."),
    ("warranty", "What warranty comes with the products?",
     "Most products carry the manufacturer's warranty listed on the product page, typically 1 year for electronics and "
     "appliances. Tires carry a treadwear mileage warranty from the tire maker."),
    ("warranty", "How do I make a warranty claim?",
     "Contact the manufacturer with your order number, which you can find in Your Orders. For items we sold within the last "
     "90 days, we can handle the replacement for you."),
    ("warranty", "What does the extended protection plan cover?",
     "The optional protection plan extends coverage to 2 or 3 years and includes mechanical and electrical failures; "
     "accidental damage is covered for phones and laptops only."),
    ("warranty", "How do I claim the tire treadwear warranty?",
     "Take the tires and proof of purchase to an authorised dealer, who measures the remaining tread; the credit is pro-rated "
     "by the miles driven."),
    ("shipping", "What shipping options do you offer?",
     "Standard shipping takes 4 to 7 business days, Expedited 2 to 3 and Next Day 1. Some addresses qualify for same-day "
     "delivery in the evening."),
    ("shipping", "Is shipping free?",
     "Standard shipping is free on orders of $35 or more. Plus members get free 2-day shipping on everything."),
    ("shipping", "Do you ship internationally?",
     "We ship to 40 countries. Import duties are estimated at checkout and collected with the payment."),
    ("shipping", "Can you ship to a PO box?",
     "Yes for small items sent by the postal service; large items and tires need a street address."),
    ("shipping", "Can I choose a delivery time?",
     "Some areas offer a 2-hour delivery window at checkout. Otherwise deliveries arrive between 8 AM and 9 PM."),
    ("account", "How do I reset my password?",
     "Select Forgot password on the sign-in page and follow the link we email you; the link expires after 1 hour."),
    ("account", "How do I close my account?",
     "Request closure under Your Account, Data and privacy. Open orders must be completed first, and unused gift card balance "
     "is lost."),
    ("membership", "What do I get with a Plus membership?",
     "Plus costs $12.99 a month and includes free 2-day shipping, early access to deals and 10% off Subscribe & Save."),
    ("membership", "How do I cancel my Plus membership?",
     "Go to Your Account, Plus membership, and choose End membership. If you have not used any benefits you get a full refund."),
    ("gifts", "Can I add gift wrap or a gift receipt?",
     "Choose 'This is a gift' at checkout to add a gift message, gift wrap for $3.99 and a receipt without prices."),
    ("services", "Do you install tires?",
     "Yes. Choose a partner installer at checkout and the tires ship straight to them; you book an installation time online."),
    ("services", "How do I recycle an old phone or printer cartridge?",
     "Use the free recycling label under Your Account, Trade-in and recycling. Eligible phones get a trade-in credit."),
    ("promotions", "Why does my promo code not work?",
     "Codes apply only to the items and dates in their terms, usually exclude gift cards and cannot be combined with other codes."),
]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60]


def faq_entries() -> list[dict[str, Any]]:
    """The help-centre articles as dicts: ``faq_id, topic, question, answer, url``."""
    return [{"faq_id": f"FAQ{i:03d}", "topic": topic, "question": q, "answer": a,
             "url": f"/help/{_slug(topic)}/{_slug(q)}"} for i, (topic, q, a) in enumerate(FAQ, 1)]
