"""What ``pincer demo`` and the tests run against in place of internet services: a local model
server that speaks the OpenAI and Anthropic wire formats and replays scripted turns."""
