"""WeCom (企业微信) intelligent bot: callback crypto, user mapping and routes."""
