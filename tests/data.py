"""Small graphs written by the tests: a toy trade network (DQA locating style) and a toy market."""

TRADE_NETWORK = """\
CREATE (baltic_sea:Trade_node {name:"baltic_sea", local_value:4.5, is_inland:false, total_power:120.0, outgoing:0.0, ingoing:1.2});
CREATE (lubeck:Trade_node {name:"lubeck", local_value:6.0, is_inland:false, total_power:200.0, outgoing:1.5, ingoing:0.8})
CREATE (novgorod:Trade_node {name:"novgorod", local_value:3.0, is_inland:true, total_power:80.0, outgoing:0.9, ingoing:0.0});
CREATE (SWE:Country {name:"SWE", home_node:"baltic_sea", development:107.373});
CREATE (DAN:Country {name:"DAN", home_node:"lubeck", development:90.0});
CREATE (NOV:Country {name:"NOV", home_node:"novgorod", development:40.5});
MATCH (a:Trade_node {name:"novgorod"}), (b:Trade_node {name:"baltic_sea"}) CREATE (a)-[r:source{flow:0.9}]->(b);
MATCH (a:Trade_node {name:"baltic_sea"}), (b:Trade_node {name:"lubeck"}) CREATE (a)-[r:source{flow:0.5}]->(b);
MATCH (t:Trade_node {name:"baltic_sea"}), (c:Country {name:"SWE"}) CREATE (c)-[r:NodeCountry{is_home: true, has_merchant: "False",base_trading_power: 30.0,calculated_trading_power: 30.0}]->(t);
MATCH (t:Trade_node {name:"novgorod"}), (c:Country {name:"SWE"}) CREATE (c)-[r:NodeCountry{is_home: false, has_merchant: "False",base_trading_power: 10.0,calculated_trading_power: 10.0}]->(t);
MATCH (t:Trade_node {name:"lubeck"}), (c:Country {name:"SWE"}) CREATE (c)-[r:NodeCountry{is_home: false, has_merchant: "False",base_trading_power: 12.0,calculated_trading_power: 12.0}]->(t);
MATCH (t:Trade_node {name:"lubeck"}), (c:Country {name:"DAN"}) CREATE (c)-[r:NodeCountry{is_home: true, has_has_merchant: "True",base_trading_power: 88.0,calculated_trading_power: 88.0}]->(t);
MATCH (t:Trade_node {name:"novgorod"}), (c:Country {name:"NOV"}) CREATE (c)-[r:NodeCountry{is_home: true, has_merchant: "False",base_trading_power: 30.0,calculated_trading_power: 30.0}]->(t);
"""

QUESTION = (
    "We are Sweden (SWE), home trade node baltic_sea, with one merchant to place. "
    "Which trade node should the merchant go to so that our profit at baltic_sea is largest?"
)
